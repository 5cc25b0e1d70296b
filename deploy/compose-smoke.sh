#!/usr/bin/env bash
# deploy/compose-smoke.sh: proves that docker-compose.yml runs. It needs no
# public image: nats-server and versitygw are built with `go install` from the
# module proxy, distributor and deploy/s3init from this tree, each into an
# image FROM scratch (deploy/local/*.Dockerfile), and deploy/compose.local.yml
# swaps those images in. Then it starts the stack, creates a bundle, uploads it
# to s3://bundles/run-1/, publishes it from inside distributor-1, waits for the
# published events, checks /readyz and /metrics of both serve containers,
# announces a burst of 20 more bundles and stops distributor-1 with SIGTERM
# while they are in flight (both processes handle some, every event gets
# exactly one result per destination), checks the outputs in the reports
# volume, stops serve gracefully, and tears everything down (down -v).
#
#   bash deploy/compose-smoke.sh
#   VERSITYGW_BIN=/path/to/static/versitygw bash deploy/compose-smoke.sh
#
# Not part of .ci/run: a cold run builds versitygw (a few minutes; a static
# versitygw of the version docker-compose.yml names can be given in
# VERSITYGW_BIN instead) and needs root for apt-get and dockerd when Docker
# is missing. Binaries are cached in $COMPOSE_SMOKE_CACHE (default
# ~/.cache/distributor-compose-smoke).
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$PWD
cache=${COMPOSE_SMOKE_CACHE:-$HOME/.cache/distributor-compose-smoke}
work=$(mktemp -d /tmp/compose-smoke.XXXXXX)
export COMPOSE_PROJECT_NAME=distributor-smoke
export LOCAL_TAG=smoke
# Host ports picked by Docker, so the stack never collides with a NATS or
# S3 already listening on this machine.
export NATS_PORT=127.0.0.1:0 NATS_MONITOR_PORT=127.0.0.1:0 S3_PORT=127.0.0.1:0
export DISTRIBUTOR_1_HTTP_PORT=127.0.0.1:0 DISTRIBUTOR_2_HTTP_PORT=127.0.0.1:0
export BUNDLES_DIR=$work/bundles

step() { printf '\n== %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
skip() { printf 'SKIP %s\n' "$*"; }
fail() {
	printf 'FAIL %s\n' "$*"
	exit 1
}

# --- Docker ----------------------------------------------------------------
step "Docker"
started_dockerd=""
if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null; then
	echo "installing docker.io and docker-compose (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io docker-compose >"$work/apt.log" 2>&1 ||
		fail "apt-get install docker.io docker-compose failed: see $work/apt.log"
fi
if ! docker info >/dev/null 2>&1; then
	echo "starting dockerd (log: $cache/dockerd.log)"
	mkdir -p "$cache"
	dockerd >"$cache/dockerd.log" 2>&1 &
	started_dockerd=$!
	for _ in $(seq 60); do docker info >/dev/null 2>&1 && break || sleep 1; done
	docker info >/dev/null 2>&1 || fail "dockerd did not answer within 60s: see $cache/dockerd.log"
fi
echo "engine $(docker version -f '{{.Server.Version}}'), $(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /')"
if ! command -v busybox >/dev/null || ! file -L "$(command -v busybox)" | grep -q 'statically linked'; then
	# The stand-in nats and versitygw images get busybox for the wget of
	# docker-compose.yml's health checks and versitygw's entrypoint script.
	DEBIAN_FRONTEND=noninteractive apt-get install -y busybox-static >"$work/apt-busybox.log" 2>&1 ||
		fail "apt-get install busybox-static failed: see $work/apt-busybox.log"
fi
busybox=$(command -v busybox)

dc() { docker-compose -f "$repo/docker-compose.yml" -f "$repo/deploy/compose.local.yml" "$@"; }

cleanup() {
	code=$?
	if [ "$code" != 0 ]; then
		step "logs (the run failed)"
		dc ps || true
		dc logs --no-color --tail 40 || true
	fi
	step "tear down"
	dc down -v --remove-orphans 2>&1 | tail -n 3 || true
	rm -rf "$work"
	if [ -n "$started_dockerd" ]; then
		echo "stopping the dockerd this script started (pid $started_dockerd)"
		kill "$started_dockerd" 2>/dev/null || true
		wait "$started_dockerd" 2>/dev/null || true
	fi
	if [ "$code" = 0 ]; then echo "compose smoke: PASS"; else echo "compose smoke: FAIL (exit $code)"; fi
}
trap cleanup EXIT

# --- Binaries ----------------------------------------------------------------
step "static binaries (cache $cache/bin)"
mkdir -p "$cache/bin"
# The NATS server version go.mod pins for the embedded server: the one the tests run.
nats_version=$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
# The gateway version docker-compose.yml pulls.
vgw_version=$(sed -n 's/^ *image: versity\/versitygw:\(v[0-9.]*\).*/\1/p' docker-compose.yml)
[ -n "$vgw_version" ] || fail "no versity/versitygw:vX.Y.Z image in docker-compose.yml"

# goinstall MODULE@VERSION NAME: a static build of a tool into the cache, once.
goinstall() {
	local mod=$1 name=$2 bin="$cache/bin/$2-${1##*@}"
	if [ ! -x "$bin" ]; then
		echo "go install $mod (slow the first time)"
		GOBIN="$work/gobin" CGO_ENABLED=0 GOFLAGS=-trimpath go install "$mod"
		mv "$work/gobin/$name" "$bin"
	fi
	go version -m "$bin" | grep -q 'CGO_ENABLED=0' || fail "$bin is not a static (CGO_ENABLED=0) build"
	echo "$name $(go version -m "$bin" | sed -n 's/^\tmod\t[^ \t]*\t\([^ \t]*\).*/\1/p') static: $bin"
}
goinstall "github.com/nats-io/nats-server/v2@$nats_version" nats-server
if [ -n "${VERSITYGW_BIN:-}" ]; then
	go version -m "$VERSITYGW_BIN" | grep -q 'CGO_ENABLED=0' || fail "VERSITYGW_BIN=$VERSITYGW_BIN is not a static (CGO_ENABLED=0) Go build"
	got=$(go version -m "$VERSITYGW_BIN" | sed -n 's/^\tmod\t[^ \t]*\t\([^ \t]*\).*/\1/p')
	[ "$got" = "$vgw_version" ] || fail "VERSITYGW_BIN=$VERSITYGW_BIN is versitygw $got, docker-compose.yml names $vgw_version"
	cp "$VERSITYGW_BIN" "$cache/bin/versitygw-$vgw_version"
	echo "versitygw $got static: $VERSITYGW_BIN (VERSITYGW_BIN)"
else
	goinstall "github.com/versity/versitygw/cmd/versitygw@$vgw_version" versitygw
fi

version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/distributor/distributor" ./cmd/distributor
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/s3init/s3init" ./deploy/s3init
echo "$("$work/distributor/distributor" --version) static: built from this tree"

# --- Images ------------------------------------------------------------------
step "images FROM scratch"
mkdir -p "$work/nats" "$work/versitygw/tmp" "$work/distributor/srv/reports" "$work/distributor/tmp"
chmod 1777 "$work/versitygw/tmp" "$work/distributor/tmp"
cp "$cache/bin/nats-server-$nats_version" "$work/nats/nats-server"
cp "$cache/bin/versitygw-$vgw_version" "$work/versitygw/versitygw"
cp "$busybox" "$work/nats/busybox"
cp "$busybox" "$work/versitygw/busybox"
# The image's own entrypoint, from the module the binary was built from.
cp "$(go env GOMODCACHE)/github.com/versity/versitygw@$vgw_version/docker-entrypoint.sh" "$work/versitygw/"
for img in nats:nats-server versitygw:versitygw s3init:s3init distributor:distributor; do
	ctx=${img%%:*} name=${img#*:}
	DOCKER_BUILDKIT=0 docker build -q -f "deploy/local/$ctx.Dockerfile" -t "distributor-local/$name:$LOCAL_TAG" "$work/$ctx" >/dev/null 2>"$work/build-$ctx.log" ||
		{ cat "$work/build-$ctx.log"; fail "docker build of $ctx"; }
	echo "distributor-local/$name:$LOCAL_TAG $(docker image inspect -f '{{.Size}}' "distributor-local/$name:$LOCAL_TAG" | awk '{printf "%.1f MB", $1/1e6}')"
done

# --- Stack -------------------------------------------------------------------
step "docker-compose -f docker-compose.yml -f deploy/compose.local.yml up -d"
dc up -d 2>&1 | grep -v -e '^Creating network' -e '^Creating volume' || true

has_http=""
if "$work/distributor/distributor" serve --help | grep -q -- '--http-addr'; then has_http=1; fi

# healthy SERVICE SECONDS: waits for Docker's health status "healthy".
healthy() {
	local id status
	id=$(dc ps -q "$1")
	for _ in $(seq "$2"); do
		status=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
		[ "$status" = healthy ] && return 0
		sleep 1
	done
	fail "$1 is $status after $2s: $(docker inspect -f '{{range .State.Health.Log}}{{.Output}}{{end}}' "$id" | tail -n 2)"
}
healthy nats 60 && ok "nats healthy (wget /healthz?js-enabled-only=true)"
healthy s3 60 && ok "s3 healthy (wget /_health)"
[ "$(docker inspect -f '{{.State.ExitCode}}' "$(dc ps -q s3-init)")" = 0 ] || fail "s3-init failed: $(dc logs --no-color s3-init | tail -n 3)"
ok "s3-init: $(dc logs --no-color s3-init | grep -o 'bucket [a-z]*: [a-z]*' | tr '\n' ' ')"
for s in distributor-1 distributor-2; do
	if [ -n "$has_http" ]; then
		healthy "$s" 90 && ok "$s healthy (distributor health --ready)"
	else
		[ "$(docker inspect -f '{{.State.Status}}' "$(dc ps -q "$s")")" = running ] || fail "$s is not running"
		skip "$s: serve has no --http-addr in this tree, so no health check; running"
	fi
done

# --- Bundle ------------------------------------------------------------------
step "bundle: create, upload to s3://bundles/run-1/"
mkdir -p "$BUNDLES_DIR/run-1/data"
printf '# Weather for tomorrow\n\nSunny.\n' >"$BUNDLES_DIR/run-1/report.md"
printf 'hour,celsius\n09,18\n' >"$BUNDLES_DIR/run-1/data/forecast.csv"
dc run --rm --no-deps --user "$(id -u)" -v "$BUNDLES_DIR:/bundles" \
	distributor-1 bundle create /bundles/run-1 --id weatherreporter.tomorrow
dc run --rm bundle-upload run-1

# --- Publish -----------------------------------------------------------------
step "publish from distributor-1 (--wait)"
dc exec -T distributor-1 distributor publish --config /etc/distributor/distributor.yaml \
	--pipeline weatherreporter.daily --bundle s3://bundles/run-1/ --wait ||
	fail "publish --wait did not see both destinations published"
published=$(dc exec -T distributor-1 distributor events tail --config /etc/distributor/distributor.yaml --type published --json)
for d in latest-html weather-archive; do
	# Compact or indented JSON: one published event per destination.
	n=$(printf '%s\n' "$published" | grep -c "\"destination_id\": *\"$d\"" || true)
	[ "$n" = 1 ] || fail "want 1 published event for $d, got $n: $published"
done
ok "one published event per destination in DISTRIBUTOR_EVENTS"

# --- Observe -----------------------------------------------------------------
step "/readyz and /metrics of both serve containers"
if [ -n "$has_http" ]; then
	total=0
	for s in distributor-1 distributor-2; do
		hp=$(dc port "$s" 9090)
		code=$(curl -s -o "$work/readyz" -w '%{http_code}' "http://$hp/readyz")
		[ "$code" = 200 ] || fail "$s /readyz answered $code: $(cat "$work/readyz")"
		ok "$s http://$hp/readyz 200 $(head -c 80 "$work/readyz" | tr '\n' ' ')"
		curl -sf "http://$hp/metrics" >"$work/metrics-$s" || fail "$s /metrics"
		grep -q '^# TYPE distributor_publications_total counter' "$work/metrics-$s" || fail "$s /metrics has no distributor_publications_total"
		n=$(awk '/^distributor_publications_total\{/ && /outcome="published"/ {s += $NF} END {print s + 0}' "$work/metrics-$s")
		total=$((total + n))
		ok "$s http://$hp/metrics: $(grep -c '^distributor_' "$work/metrics-$s") distributor_ samples, $n published"
	done
	# One event with two destinations: the process that took it published both.
	[ "$total" = 2 ] || fail "distributor_publications_total{outcome=\"published\"} over both processes is $total, want 2"
	ok "distributor_publications_total{outcome=\"published\"} over both processes = 2"
	grep -h '^distributor_publications_total{' "$work"/metrics-distributor-* | grep 'outcome="published"' | grep -v ' 0$' | sed 's/^/     /'
	dc exec -T distributor-2 distributor health --ready >/dev/null && ok "distributor health --ready inside distributor-2 (the HEALTHCHECK command)"
	logs=$(dc logs --no-color distributor-1 distributor-2)
	printf '%s\n' "$logs" | grep -q '"event_id":"' || fail "no JSON log line with event_id"
	ok "JSON logs carry event_id: $(printf '%s\n' "$logs" | grep '"event_id":"' | head -n 1 | sed 's/^[^|]*| //' | cut -c1-160)…"
else
	skip "/readyz and /metrics: serve has no --http-addr in this tree (checks are in this script and run once it does)"
fi

# --- Burst -------------------------------------------------------------------
burst=20
step "a burst of $burst bundles; SIGTERM to distributor-1 while they are in flight"
if ! command -v jq >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y jq >"$work/apt-jq.log" 2>&1 ||
		fail "apt-get install jq failed: see $work/apt-jq.log"
fi
# handled HOST:PORT: the publications the serve process listening there
# reported since it started, any outcome. (The ports are looked up once:
# docker-compose takes about a second for each lookup.)
handled() {
	curl -sf "http://$1/metrics" | awk '/^distributor_publications_total\{/ {s += $NF} END {print s + 0}'
}
hp1=$(dc port distributor-1 9090) hp2=$(dc port distributor-2 9090)
natsurl="nats://$(dc port nats 4222)" s3url="http://$(dc port s3 7070)"
# One source, a new version per bundle (each 100 files of 10 kB): newest
# wins, so an older version that arrives late is superseded (replacement)
# or keeps the newer paths (additive); either is its one result.
for i in $(seq "$burst"); do
	b="$BUNDLES_DIR/burst/run-$i"
	mkdir -p "$b/data"
	printf '# Weather, run %d\n\nCloudy.\n' "$i" >"$b/report.md"
	for f in $(seq 100); do head -c 10000 /dev/urandom >"$b/data/part-$f.bin"; done
	"$work/distributor/distributor" bundle create "$b" --id weatherreporter.burst >/dev/null
done
dc run --rm --entrypoint s3init bundle-upload upload /bundles/burst s3://bundles/burst/ | tail -n 1
before1=$(handled "$hp1") before2=$(handled "$hp2")
# Announced from the host, through the published ports (the same
# configuration, NATS and S3 as the host sees them), while both serve
# processes are paused: the burst then reaches them at once.
dc pause distributor-1 distributor-2 2>&1 | grep -v '^Pausing' || true
ids=()
for i in $(seq "$burst"); do
	ids+=("$(DISTRIBUTOR_NATS_URL="$natsurl" DISTRIBUTOR_S3_ENDPOINT="$s3url" \
		AWS_ACCESS_KEY_ID=distributor AWS_SECRET_ACCESS_KEY=distributor-secret \
		"$work/distributor/distributor" publish --config deploy/distributor.yaml \
		--pipeline weatherreporter.daily --bundle "s3://bundles/burst/run-$i/" --json | jq -r .event_id)")
done
dc unpause distributor-1 distributor-2 2>&1 | grep -v '^Unpausing' || true
ok "announced $burst bundle events"
# SIGTERM once distributor-1 has started on the burst: it stops fetching,
# finishes what it holds, and exits; distributor-2 takes the rest.
for _ in $(seq 300); do
	[ "$(handled "$hp1")" -gt "$before1" ] && break
	sleep 0.05
done
h1=$(handled "$hp1") h2=$(handled "$hp2")
[ "$h1" -gt "$before1" ] || fail "distributor-1 handled nothing of the burst within 30 s"
done_at_term=$((h1 - before1 + h2 - before2))
[ "$done_at_term" -lt $((burst * 2)) ] || fail "the burst was over before the SIGTERM ($done_at_term results): nothing was in flight"
t0=$(date +%s)
dc stop distributor-1 2>&1 | grep -v '^Stopping' || true
code=$(docker inspect -f '{{.State.ExitCode}}' "$(dc ps -q distributor-1)")
[ "$code" = 0 ] || fail "distributor-1 exited $code after SIGTERM mid-burst (137 = killed)"
ok "distributor-1 stopped by SIGTERM in $(($(date +%s) - t0))s, exit 0; $done_at_term of $((burst * 2)) publications were reported when it came"
dc start distributor-1 2>&1 | grep -v '^Starting' || true
healthy distributor-1 90 && ok "distributor-1 started again and healthy"
# Every event: exactly one result per destination.
want=$((burst * 2))
idsjson=$(printf '%s\n' "${ids[@]}" | jq -R . | jq -s -c .)
mine='[.[] | select(.bundle_event_id | IN($ids[]))]'
for _ in $(seq 120); do
	dc exec -T distributor-2 distributor events tail --config /etc/distributor/distributor.yaml --json >"$work/results" || true
	got=$(jq -s --argjson ids "$idsjson" "$mine | length" "$work/results")
	[ "$got" -ge "$want" ] && break
	sleep 1
done
dupes=$(jq -s -r --argjson ids "$idsjson" \
	"$mine | group_by(.bundle_event_id + \".\" + .destination_id) | map(select(length != 1)) | map(.[0].id + \" x\" + (length | tostring)) | .[]" "$work/results")
[ -z "$dupes" ] || fail "results not exactly once: $dupes"
[ "$got" = "$want" ] || fail "$got results for $burst events x 2 destinations, want $want"
ok "$want results for $burst events x 2 destinations, one each: $(jq -s -r --argjson ids "$idsjson" "$mine | group_by(.type) | map(\"\\(.[0].type) \\(length)\") | join(\", \")" "$work/results")"
d2=$(($(handled "$hp2") - before2))
[ "$d2" -gt 0 ] || fail "distributor-2 handled none of the burst"
ok "both processes handled some: distributor-1 $((h1 - before1)) before its SIGTERM, distributor-2 $d2"

# --- Outputs -----------------------------------------------------------------
step "outputs"
# As the README runs it: the image works in /etc/distributor, so the
# default --config is the mounted file.
for d in latest-html weather-archive; do
	dc exec -T distributor-1 distributor verify --destination "$d"
done
# Read the reports volume from a container: the stand-in nats image has busybox.
vol="${COMPOSE_PROJECT_NAME}_reports"
docker run --rm --entrypoint sh -v "$vol:/r:ro" "distributor-local/nats-server:$LOCAL_TAG" -c \
	'cd /r && find . -type f | sort && echo "--- tomorrow/index.html" && grep -o "<title>.*</title>\|<h1[^>]*>.*</h1>" tomorrow/index.html && ls -ln tomorrow/index.html' |
	tee "$work/volume"
grep -q '^./tomorrow/index.html$' "$work/volume" || fail "tomorrow/index.html missing from the reports volume"
grep -q '<h1[^>]*>Weather for tomorrow</h1>' "$work/volume" || fail "tomorrow/index.html does not hold the rendered report"
grep -q '^./.distributor.json$' "$work/volume" || fail ".distributor.json missing from the reports volume"
grep -Eq '^-[rwx-]+ +[0-9]+ +65532 +65532 ' "$work/volume" || fail "outputs are not owned by the image's non-root user 65532"
ok "reports volume: rendered report and catalog, written by uid 65532"

# --- Stop --------------------------------------------------------------------
step "graceful stop (SIGTERM, stop_grace_period 45s)"
t0=$(date +%s)
dc stop distributor-1 distributor-2 2>&1 | grep -v '^Stopping' || true
for s in distributor-1 distributor-2; do
	code=$(docker inspect -f '{{.State.ExitCode}}' "$(dc ps -q "$s")")
	[ "$code" = 0 ] || fail "$s exited $code after SIGTERM (137 = killed)"
done
ok "both serve processes exited 0 in $(($(date +%s) - t0))s"
for s in distributor-1 distributor-2; do
	dc logs --no-color "$s" | grep -E '"message":"(shutdown signal[^"]*|stopped)"' |
		sed -E "s/.*\"time\":\"([^\"]*)\".*\"message\":\"([^\"]*)\".*/     $s \\1 \\2/" || true
done
