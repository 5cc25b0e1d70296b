package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/metrics"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/testenv"
)

// httpGet returns the status and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func expectGet(t *testing.T, url string, status int, body string) {
	t.Helper()
	if code, got := httpGet(t, url); code != status || got != body {
		t.Errorf("GET %s = %d %q, want %d %q", url, code, got, status, body)
	}
}

// waitGet polls url until its body satisfies ok, and returns it.
func waitGet(t *testing.T, url string, ok func(status int, body string) bool, what string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := httpGet(t, url)
		if ok(code, body) {
			return code, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: GET %s still %d %q after 15s", what, url, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var (
	labelRE   = regexp.MustCompile(`([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"`)
	logTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
)

// TestServeObserve: serve's /healthz, /readyz and /metrics while it
// publishes through a real NATS server; /readyz turns 503 with the reason
// when the server goes away while /healthz stays 200; the metrics count
// exactly what was published and no label holds a path or an event id;
// the logs are JSON lines with RFC 3339 times and the event's keys.
func TestServeObserve(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	addr := testenv.FreeAddr(t)
	start := time.Now()
	s := startServe(t, e.cfg, "--http-addr", addr)
	base := "http://" + addr
	expectGet(t, base+"/healthz", http.StatusOK, "ok\n")
	expectGet(t, base+"/readyz", http.StatusOK, "ready\n")

	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	b2 := e.makeBundle(t, "b2", "src.two", map[string]string{"other.txt": "other\n"})
	var ids []string
	for _, b := range []string{b1, b2} {
		code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b)
		if code != 0 {
			t.Fatalf("publish %s: exit %d\n%s%s", b, code, stdout, stderr)
		}
		ids = append(ids, announcedID(t, stdout))
	}
	code, stdout, _ := e.cmd(t, "publish", "--wait", "--pipeline", "p.nope", "--bundle", b1)
	if code != exitUsage {
		t.Fatalf("publish to an unknown pipeline: exit %d, want %d", code, exitUsage)
	}
	ids = append(ids, announcedID(t, stdout))

	// publish --wait returns on the result events; the acks follow.
	_, body := waitGet(t, base+"/metrics", func(_ int, b string) bool {
		return strings.Contains(b, "\ndistributor_events_in_flight 0\n") && strings.Contains(b, "\ndistributor_consumer_ack_pending 0\n")
	}, "every event handled and acked")
	bytesD1 := len(bundleOne["report.md"]) + len(bundleOne["data.csv"]) + len("other\n")
	for _, want := range []string{
		`distributor_publications_total{destination="d1",outcome="published"} 2`,
		`distributor_publications_total{destination="d2",outcome="published"} 2`,
		`distributor_publications_total{destination="d3",outcome="published"} 0`,
		`distributor_publications_total{destination="d1",outcome="failed"} 0`,
		`distributor_publications_total{destination="",outcome="failed"} 1`,
		`distributor_failures_total{destination="",reason="unknown_pipeline"} 1`,
		`distributor_outputs_total{action="written",destination="d1"} 3`,
		`distributor_outputs_total{action="written",destination="d2"} 3`,
		`distributor_outputs_total{action="deleted",destination="d1"} 0`,
		`distributor_written_bytes_total{destination="d1"} ` + strconv.Itoa(bytesD1),
		`distributor_publication_duration_seconds_count{destination="d1"} 2`,
		`distributor_lease_wait_seconds_count 4`,
		`distributor_leases_lost_total 0`,
		`distributor_redeliveries_total 0`,
		`distributor_retries_total{destination="d1"} 0`,
		`distributor_consumer_pending 0`,
		`distributor_consumer_ack_pending 0`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics lacks the Go and process collectors' %s", want)
		}
	}
	m := regexp.MustCompile(`\ndistributor_last_success_timestamp_seconds\{destination="d1"\} (\S+)\n`).FindStringSubmatch(body)
	if m == nil {
		t.Errorf("/metrics lacks distributor_last_success_timestamp_seconds of d1")
	} else if v, _ := strconv.ParseFloat(m[1], 64); v < float64(start.Unix()) || v > float64(time.Now().Unix()+1) {
		t.Errorf("last success of d1 = %s, want a time during the test", m[1])
	}
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, "distributor_") {
			continue
		}
		for _, l := range labelRE.FindAllStringSubmatch(line, -1) {
			bad := strings.Contains(l[2], "/")
			for _, id := range ids {
				bad = bad || strings.Contains(l[2], id)
			}
			if bad {
				t.Errorf("label %s=%q holds a path or an event id: %s", l[1], l[2], line)
			}
		}
	}

	// The server goes away: not ready, still alive, the drop logged.
	e.nats.Server.Shutdown()
	_, why := waitGet(t, base+"/readyz", func(c int, b string) bool {
		return c == http.StatusServiceUnavailable && strings.HasPrefix(b, "NATS connection is")
	}, "readyz after the NATS server stopped")
	if why != "NATS connection is RECONNECTING\n" {
		t.Errorf("readyz reason %q, want %q", why, "NATS connection is RECONNECTING\n")
	}
	expectGet(t, base+"/healthz", http.StatusOK, "ok\n")
	// nats.go runs its disconnect handler on its own goroutine: the status
	// can change before the line is written.
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(s.stderr.String(), "disconnected from NATS; reconnecting")
	}, "the disconnect line")
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}

	type logLine struct {
		Level, Message, Time string
		EventID              string `json:"event_id"`
		PipelineID           string `json:"pipeline_id"`
		Attempt              *int   `json:"attempt"`
		DestinationID        string `json:"destination_id"`
		Root                 string `json:"root"`
		LeaseToken           string `json:"lease_token"`
		Type, Reason         string
	}
	seen := map[string]int{}
	for raw := range strings.SplitSeq(strings.TrimSpace(s.stderr.String()), "\n") {
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("serve's stderr is not a terminal, so it logs JSON; got %q: %v", raw, err)
		}
		if !logTimeRE.MatchString(l.Time) {
			t.Errorf("time %q is not RFC 3339 with milliseconds: %s", l.Time, raw)
		}
		seen[l.Level+" "+l.Message]++
		if l.Message != "result" {
			continue
		}
		if l.EventID == "" || l.PipelineID == "" || l.Attempt == nil || *l.Attempt != 1 {
			t.Errorf("result line without event_id, pipeline_id or attempt: %s", raw)
		}
		if l.PipelineID == "p.one" && (l.DestinationID == "" || l.Root != "file://"+filepath.ToSlash(e.roots[l.DestinationID])+"/" || l.LeaseToken == "") {
			t.Errorf("result line without destination_id, root or lease_token: %s", raw)
		}
	}
	if out := s.stderr.String(); strings.Index(out, "shutdown signal received") > strings.Index(out, `"message":"stopped"`) {
		t.Errorf("the shutdown signal is logged after stopped:\n%s", out)
	}
	for line, n := range map[string]int{
		"info result":  4,
		"error result": 1, // the unknown pipeline
		"warn disconnected from NATS; reconnecting":               1,
		"info shutdown signal received; finishing in-flight work": 1,
	} {
		if seen[line] != n {
			t.Errorf("%d log lines %q, want %d; all lines:\n%s", seen[line], line, n, s.stderr.String())
		}
	}
}

// TestReadyz: /readyz says why serve is not ready, one line each:
// connecting, a stream or the lease bucket unreachable, draining.
func TestReadyz(t *testing.T) {
	t.Parallel()
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	ctx := context.Background()
	streams, err := events.Setup(ctx, js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ready := &readiness{}
	srv := httptest.NewServer(observeHandler(ready, metrics.New(nil), nil))
	defer srv.Close()
	url := srv.URL + "/readyz"

	expectGet(t, url, http.StatusServiceUnavailable, "connecting to NATS\n")
	restoring := ""
	ready.connected(n.Conn(t), streams, func() string { return restoring })

	// The durable must exist and take deliveries.
	expectGet(t, url, http.StatusServiceUnavailable, "consumer distributor-publisher on stream DISTRIBUTOR_BUNDLES unreachable: nats: API error: code=404 err_code=10014 description=consumer not found\n")
	durable := jetstream.ConsumerConfig{Durable: streams.Subjects.Durable(), AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := js.CreateConsumer(ctx, streams.Subjects.BundlesStream(), durable); err != nil {
		t.Fatal(err)
	}
	expectGet(t, url, http.StatusOK, "ready\n")
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := js.PauseConsumer(ctx, streams.Subjects.BundlesStream(), durable.Durable, until); err != nil {
		t.Fatal(err)
	}
	expectGet(t, url, http.StatusServiceUnavailable, "consumer distributor-publisher on stream DISTRIBUTOR_BUNDLES is paused until "+until.Format(time.RFC3339)+"\n")
	if _, err := js.ResumeConsumer(ctx, streams.Subjects.BundlesStream(), durable.Durable); err != nil {
		t.Fatal(err)
	}
	expectGet(t, url, http.StatusOK, "ready\n")

	// While serve recreates what NATS lacks, it says so.
	restoring = "consumer distributor-publisher on stream DISTRIBUTOR_BUNDLES does not exist on NATS; recreating"
	expectGet(t, url, http.StatusServiceUnavailable, restoring+"\n")
	restoring = ""
	expectGet(t, url, http.StatusOK, "ready\n")
	if err := js.DeleteKeyValue(ctx, streams.Subjects.LeaseBucket()); err != nil {
		t.Fatal(err)
	}
	expectGet(t, url, http.StatusServiceUnavailable, "key-value bucket DISTRIBUTOR_LEASES unreachable: nats: API error: code=404 err_code=10059 description=stream not found\n")
	if err := js.DeleteStream(ctx, streams.Subjects.EventsStream()); err != nil {
		t.Fatal(err)
	}
	expectGet(t, url, http.StatusServiceUnavailable, "stream DISTRIBUTOR_EVENTS unreachable: nats: API error: code=404 err_code=10059 description=stream not found\n")
	ready.drain()
	expectGet(t, url, http.StatusServiceUnavailable, "draining: shutting down, in-flight work is finishing\n")
	expectGet(t, srv.URL+"/healthz", http.StatusOK, "ok\n")
}

// TestServeWaitsForNATS: serve started before its NATS server retries the
// first connection with back-off (logged at warn), is alive but not ready
// meanwhile, and publishes once the server is up.
func TestServeWaitsForNATS(t *testing.T) {
	t.Parallel()
	natsAddr := testenv.FreeAddr(t)
	e := writeNATSConfig(t, "  url: nats://"+natsAddr+"\n")
	httpAddr := testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &serveHandle{cancel: cancel, done: make(chan int, 1), stderr: &testenv.SyncBuffer{}}
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", e.cfg, "--http-addr", httpAddr}, &testenv.SyncBuffer{}, s.stderr)
	}()
	t.Cleanup(func() { s.stop(t) })
	base := "http://" + httpAddr
	waitFor(t, s, `"message":"NATS not reachable; retrying"`)
	waitGet(t, base+"/healthz", func(c int, _ string) bool { return c == http.StatusOK }, "healthz while connecting")
	expectGet(t, base+"/readyz", http.StatusServiceUnavailable, "connecting to NATS\n")
	// A second retry, so that the delays below show the back-off growing.
	waitFor(t, s, `"attempt":2,"next_delay":"500ms"`)

	srv, err := natsserver.Start(context.Background(), natsserver.Options{Listen: natsAddr, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	e.url = srv.ClientURL()
	waitFor(t, s, "consuming bundle-ready events")
	expectGet(t, base+"/readyz", http.StatusOK, "ready\n")
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish once NATS is up: exit %d\n%s%s", code, stdout, stderr)
	}
	assertBlocks(t, "publish --wait", stdout, "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")

	// The retries: warn, numbered, with a growing delay.
	var delays []string
	connected := ""
	for raw := range strings.SplitSeq(s.stderr.String(), "\n") {
		var l struct {
			Level, Message string
			Attempt        int    `json:"attempt"`
			NextDelay      string `json:"next_delay"`
		}
		if json.Unmarshal([]byte(raw), &l) != nil {
			continue
		}
		switch l.Message {
		case "NATS not reachable; retrying":
			if l.Level != "warn" || l.Attempt != len(delays)+1 {
				t.Errorf("retry line: %s", raw)
			}
			delays = append(delays, l.NextDelay)
		case "connected to NATS":
			connected = fmt.Sprintf("%s attempt %d", l.Level, l.Attempt)
		}
	}
	if len(delays) < 2 || delays[0] != "250ms" || delays[1] != "500ms" {
		t.Errorf("retry delays %v, want 250ms, 500ms, ...", delays)
	}
	if want := fmt.Sprintf("info attempt %d", len(delays)+1); connected != want {
		t.Errorf("connected line: %q, want %q", connected, want)
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}
}

// TestServeConnectTimeout: --connect-timeout bounds the retries.
func TestServeConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := testenv.RefusedAddr(t)
	e := writeNATSConfig(t, "  url: nats://"+addr+"\n")
	start := time.Now()
	code, _, stderr := e.cmd(t, "serve", "--http-addr", "off", "--connect-timeout", "600ms", "--log-level", "error")
	want := "distributor: connect to NATS at nats://" + addr + ": nats: no servers available for connection; gave up after 600ms (--connect-timeout)\n"
	if code != exitFailed || stderr != want {
		t.Errorf("serve with nothing at nats.url: exit %d, stderr %q; want %d, %q", code, stderr, exitFailed, want)
	}
	if took := time.Since(start); took < 600*time.Millisecond || took > 3*time.Second {
		t.Errorf("gave up after %s, want about 600ms", took)
	}
}

// waitFor waits until serve's stderr contains s.
func waitFor(t *testing.T, s *serveHandle, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(s.stderr.String(), what) {
		select {
		case code := <-s.done:
			s.code, s.exited = code, true
			t.Fatalf("serve exited %d while waiting for %s: %s", code, what, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 15s: %s", what, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeHTTPAddr: a used or malformed address is one line naming the fix.
func TestServeHTTPAddr(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, stderr := e.cmd(t, "serve", "--http-addr", l.Addr().String())
	if want := "distributor: http.listen " + l.Addr().String() + " is in use: set http.listen or --http-addr to a free address, or \"off\"\n"; code != exitUsage || stderr != want {
		t.Errorf("serve on a used HTTP port: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
	code, _, stderr = e.cmd(t, "serve", "--http-addr", "9090")
	if want := "distributor: --http-addr \"9090\": must be host:port, e.g. \"127.0.0.1:9090\", or \"off\"\n"; code != exitUsage || stderr != want {
		t.Errorf("serve --http-addr 9090: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
	code, _, stderr = e.cmd(t, "config", "validate", "--log-format", "xml")
	if want := "distributor: --log-format \"xml\": use json or console\n"; code != exitUsage || stderr != want {
		t.Errorf("--log-format xml: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
}

// TestMetricsDuringANATSOutage: while its NATS server is down (killed),
// serve's /metrics answers without waiting for NATS, says
// distributor_nats_connected 0 and keeps the consumer's backlog as last asked, with the time of that
// answer, so that a backlog alert does not go quiet.
func TestMetricsDuringANATSOutage(t *testing.T) {
	t.Parallel()
	n := testenv.NewNATSProcess(t)
	e := writeNATSConfig(t, "  url: "+n.URL+"\n")
	addr := testenv.FreeAddr(t)
	s := startServe(t, e.cfg, "--http-addr", addr)
	url := "http://" + addr + "/metrics"
	b := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b); code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", code, stdout, stderr)
	}
	backlog := regexp.MustCompile(`\n(distributor_consumer_ack_pending \S+)\n(?s:.*)\n(distributor_consumer_pending \S+)\n`)
	refreshed := regexp.MustCompile(`\ndistributor_consumer_last_refresh_timestamp_seconds (\S+)\n`)
	_, body := waitGet(t, url, func(_ int, b string) bool {
		return strings.Contains(b, "\ndistributor_nats_connected 1\n") && strings.Contains(b, "\ndistributor_consumer_ack_pending 0\n") &&
			refreshed.MatchString(b)
	}, "the backlog asked from NATS")
	if at, _ := strconv.ParseFloat(refreshed.FindStringSubmatch(body)[1], 64); time.Since(time.Unix(int64(at), 0)) > time.Minute {
		t.Errorf("last refresh %f, want about now", at)
	}

	n.Kill()
	_, body = waitGet(t, url, func(_ int, b string) bool { return strings.Contains(b, "\ndistributor_nats_connected 0\n") },
		"distributor_nats_connected 0 after the server was killed")
	want, last := backlog.FindStringSubmatch(body), refreshed.FindStringSubmatch(body)
	if want == nil || last == nil {
		t.Fatalf("/metrics dropped the backlog during the outage:\n%s", body)
	}
	// Longer than a refresh interval: no answer comes, nothing waits for one.
	for range 6 {
		start := time.Now()
		code, body := httpGet(t, url)
		// A scrape that waits for NATS takes at least its request
		// timeout: no sooner does a request to a killed server end. One
		// that does not wait is far quicker, but a loaded machine may
		// hold it up: the bound is that timeout.
		if took := time.Since(start); code != http.StatusOK || took >= readyCheckTimeout {
			t.Errorf("a scrape during the outage: %d after %s, want 200 before a NATS request's timeout (%s)", code, took, readyCheckTimeout)
		}
		if got := backlog.FindStringSubmatch(body); got == nil || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("backlog during the outage %v, want the last values %q", got, want[1:])
		}
		if got := refreshed.FindStringSubmatch(body); got == nil || got[1] != last[1] {
			t.Errorf("last refresh during the outage %v, want %s (no answer since)", got, last[1])
		}
		if !strings.Contains(body, "\ndistributor_nats_connected 0\n") {
			t.Errorf("distributor_nats_connected is not 0 during the outage")
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Back: connected again, and the backlog refreshed.
	n.Start()
	waitGet(t, url, func(_ int, b string) bool {
		got := refreshed.FindStringSubmatch(b)
		return strings.Contains(b, "\ndistributor_nats_connected 1\n") && got != nil && got[1] != last[1]
	}, "the backlog refreshed after NATS came back")
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}
}
