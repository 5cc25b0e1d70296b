package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
)

func TestServePublishWait(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	e.setWorkflow(t, "d2", "replacement")
	s := startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)

	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 || stderr != "" {
		t.Fatalf("publish --wait: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "announced ") || !strings.Contains(stdout, ": pipeline p.one, bundle "+b1+", seq 1\n") {
		t.Errorf("publish --wait: first line of %q", stdout)
	}
	assertBlocks(t, "publish --wait", stdout,
		"published d1 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
		"published d2 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
	)
	for _, d := range []string{"d1", "d2"} {
		for p, content := range bundleOne {
			if got := readFile(t, filepath.Join(e.roots[d], p)); got != content {
				t.Errorf("%s/%s = %q, want %q", d, p, got, content)
			}
		}
		cat := readCatalog(t, e.roots[d])
		if len(cat.Outputs) != 2 {
			t.Fatalf("%s catalog: %d outputs, want 2", d, len(cat.Outputs))
		}
		for _, o := range cat.Outputs {
			if o.PipelineID != "p.one" || o.DestinationID != d || o.Source.ID != "src.one" || o.Kind != "source" {
				t.Errorf("%s catalog record %+v", d, o)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.roots["d3"], "report.md")); !os.IsNotExist(err) {
		t.Errorf("d3 (another pipeline's destination) was written: %v", err)
	}

	// Announcing the same bundle again is a no-op publication.
	code, stdout, _ = e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 {
		t.Fatalf("second publish: exit %d\n%s", code, stdout)
	}
	assertBlocks(t, "second publish --wait", stdout,
		"published d1 p.one written 0, unchanged 2, deleted 0",
		"published d2 p.one written 0, unchanged 2, deleted 0",
	)

	// An unmanaged file at a planned path blocks d1 only.
	stray := filepath.Join(e.roots["d1"], "new.txt")
	if err := os.WriteFile(stray, []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}
	catBefore := readFile(t, filepath.Join(e.roots["d1"], ".distributor.json"))
	b2 := e.makeBundle(t, "b2", "src.one", map[string]string{"new.txt": "from the bundle"})
	code, stdout, stderr = e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b2)
	if code != exitRefused {
		t.Errorf("publish onto a stray file: exit %d, want %d", code, exitRefused)
	}
	assertBlocks(t, "publish --wait with a collision", stdout,
		"collision d1 p.one blocked by unmanaged new.txt",
		"published d2 p.one written 1, unchanged 0, deleted 2 | + new.txt | - data.csv | - report.md",
	)
	if want := "distributor: not published to d1: collision with 1 unmanaged path(s) (see the events above); once the cause is fixed, `distributor replay --id " + announcedID(t, stdout) + "` publishes again\n"; stderr != want {
		t.Errorf("publish with a collision: stderr\n %q\nwant %q", stderr, want)
	}
	if got := readFile(t, stray); got != "hand-made" {
		t.Errorf("the unmanaged file was modified: %q", got)
	}
	if got := readFile(t, filepath.Join(e.roots["d1"], ".distributor.json")); got != catBefore {
		t.Errorf("d1's catalog changed despite the collision")
	}

	// An older version of src.one: both destinations hold a newer one.
	// Replacement d2 reports superseded (nothing changes) and publish
	// exits 3; additive d1 keeps the newer report.md and writes the rest.
	b0 := e.makeBundle(t, "b0", "src.one", map[string]string{"report.md": "# Last year\n", "last-year.txt": "old\n"})
	if code, _, stderr := runCmd(t, "bundle", "create", b0, "--id", "src.one", "--created", "2025-01-01T00:00:00Z"); code != 0 {
		t.Fatalf("bundle create: %s", stderr)
	}
	reportBefore := recordAt(t, e.roots["d1"], "report.md")
	d2Before := readFile(t, filepath.Join(e.roots["d2"], ".distributor.json"))
	var held catalog.Source // the newest version d2 holds
	for _, o := range readCatalog(t, e.roots["d2"]).Outputs {
		if planner.Newer(o.Source, held) {
			held = o.Source
		}
	}
	code, stdout, stderr = e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b0)
	if code != exitRefused {
		t.Errorf("publish an older bundle: exit %d, want %d", code, exitRefused)
	}
	assertBlocks(t, "publish --wait of an older bundle", stdout,
		"published d1 p.one written 1, unchanged 0, deleted 0, 1 kept (a newer version of the owner wrote them) | + last-year.txt",
		fmt.Sprintf("superseded d2 p.one already has src.one created %s (digest %s); nothing changed", held.Created.Format(time.RFC3339Nano), held.Digest))
	if want := "distributor: not published to d2: superseded by a newer version of the source (see the events above); `distributor replay --id " + announcedID(t, stdout) + " --allow-older` publishes it over the newer version (a roll back)\n"; stderr != want {
		t.Errorf("publish an older bundle: stderr\n %q\nwant %q", stderr, want)
	}
	if got := readFile(t, filepath.Join(e.roots["d2"], ".distributor.json")); got != d2Before {
		t.Errorf("d2's catalog changed for a superseded bundle")
	}
	if got := recordAt(t, e.roots["d1"], "report.md"); got != reportBefore || readFile(t, filepath.Join(e.roots["d1"], "report.md")) != bundleOne["report.md"] {
		t.Errorf("d1's newer report.md changed: %+v, was %+v", got, reportBefore)
	}

	// An unknown pipeline: serve reports one failed event, publish exits 2
	// as apply does.
	code, stdout, stderr = e.cmd(t, "publish", "--wait", "--pipeline", "p.nope", "--bundle", b1)
	if code != exitUsage {
		t.Errorf("publish to an unknown pipeline: exit %d, want %d", code, exitUsage)
	}
	assertBlocks(t, "publish --wait to an unknown pipeline", stdout,
		`failed - p.nope unknown_pipeline: unknown pipeline "p.nope": known pipelines: p.one, p.two`)
	if want := "distributor: not published to pipeline p.nope: failed (unknown_pipeline) (see the events above); once the cause is fixed, `distributor replay --id " + announcedID(t, stdout) + "` publishes again\n"; stderr != want {
		t.Errorf("publish to an unknown pipeline: stderr\n %q\nwant %q", stderr, want)
	}

	if code := s.stop(t); code != 0 {
		t.Errorf("serve exited %d after its context ended, want 0: %s", code, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "stopped") {
		t.Errorf("serve did not log stopped: %s", s.stderr.String())
	}
}

// recordAt is the record of path in the catalog of the local root.
func recordAt(t *testing.T, root, path string) catalog.Output {
	t.Helper()
	o, ok := readCatalog(t, root).Lookup(path)
	if !ok {
		t.Fatalf("%s: no record of %s", root, path)
	}
	return o
}

// TestPublishWaitWithoutServe: the event is announced, but nobody publishes.
func TestPublishWaitWithoutServe(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--timeout", "300ms", "--pipeline", "p.one", "--bundle", b1)
	id := announcedID(t, stdout)
	if want := "distributor: timed out after 300ms waiting for results of " + id + " (0 of 2): is `distributor serve` running?\n"; code != exitFailed || stderr != want {
		t.Errorf("publish --wait without serve: exit %d, stderr %q; want %d, %q", code, stderr, exitFailed, want)
	}

	// Interrupted (SIGINT cancels the context) once it announced and
	// waits: say so, not "timed out".
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"publish", "--wait", "--pipeline", "p.one", "--bundle", b1, "--config", e.cfg}, &out, &errb)
	}()
	testenv.Eventually(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "announced ") }, "publish --wait to announce")
	cancel()
	code = <-done
	id = announcedID(t, out.String())
	if want := "distributor: interrupted while waiting for results of " + id + " (0 of 2); it stays announced: `distributor events tail` shows its results\n"; code != exitFailed || errb.String() != want {
		t.Errorf("interrupted publish --wait: exit %d, stderr %q; want %d, %q", code, errb.String(), exitFailed, want)
	}
	if n := e.bundleMsgs(t); n != 2 {
		t.Errorf("%d bundle-ready events stored, want 2", n)
	}
}

func TestServeListenInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	e := writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n")
	code, stdout, stderr := e.cmd(t, "serve", "--log-level", "error")
	if code != exitUsage || stdout != "" {
		t.Errorf("serve on a used port: exit %d, stdout %q; want %d, as for a used http.listen", code, stdout, exitUsage)
	}
	if want := "distributor: nats.listen " + addr + " is in use: set nats.listen or nats.url\n"; stderr != want {
		t.Errorf("serve on a used port: stderr %q, want %q", stderr, want)
	}
}

// TestServeReplicasNeedCluster: the embedded server is a single node, so
// nats.replicas above 1 without nats.url is refused before anything starts.
func TestServeReplicasNeedCluster(t *testing.T) {
	t.Parallel()
	e := writeNATSConfig(t, "  replicas: 3\n  listen: 127.0.0.1:0\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n")
	code, stdout, stderr := e.cmd(t, "serve", "--log-level", "error")
	if code != exitUsage || stdout != "" {
		t.Errorf("serve with replicas 3 and no nats.url: exit %d, stdout %q; want %d", code, stdout, exitUsage)
	}
	if want := "distributor: nats.replicas is 3 but no nats.url is set: replicas need a NATS cluster (2.11 or newer); set nats.url to it, or nats.replicas to 1 for the embedded server\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// TestServeOnCluster: with nats.url naming a 3-node cluster and
// nats.replicas 3, serve and publish put both streams, the lease bucket and
// the durable on three replicas, and a publication goes through.
func TestServeOnCluster(t *testing.T) {
	// Not parallel: a cluster starved of CPU re-elects stream leaders, and
	// publish --wait's reader does not yet ride out a "no responders"
	// from a fetch (seen once with this test in parallel).
	cl := testenv.NewCluster(t)
	ctx := context.Background()
	js := cl.JetStream(t)
	e := placedOnCluster(t, cl)
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish on the cluster: exit %d\n%s%s", code, stdout, stderr)
	}
	assertBlocks(t, "publish --wait", stdout, "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")
	for _, name := range []string{"DISTRIBUTOR_BUNDLES", "DISTRIBUTOR_EVENTS", "KV_DISTRIBUTOR_LEASES"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, r)
		}
	}
	cons, err := js.Consumer(ctx, "DISTRIBUTOR_BUNDLES", "distributor-publisher")
	if err != nil {
		t.Fatal(err)
	}
	if r := cons.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("durable: %d replicas, want 3", r)
	}
}

// TestServeEmbeddedServer: without nats.url, serve embeds a server on
// nats.listen and the other commands find it there.
func TestServeEmbeddedServer(t *testing.T) {
	t.Parallel()
	e, addr := newOfflineEnv(t)
	s := startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish via the embedded server at %s: exit %d\n%s%s", addr, code, stdout, stderr)
	}
	assertBlocks(t, "publish --wait", stdout, "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")
	if !strings.Contains(s.stderr.String(), `"url":"nats://`+addr+`"`) {
		t.Errorf("serve did not log its embedded server's URL nats://%s: %s", addr, s.stderr.String())
	}
	start := time.Now()
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}
	t.Logf("serve with an embedded server stopped in %s", time.Since(start))
}

// twoServeProcessesShareWork runs two serve binaries on one NATS server
// and checks that every announced bundle is published exactly once per
// destination, that both did work, and that SIGTERM stops both cleanly.
func twoServeProcessesShareWork(t *testing.T, bin string) {
	const nEvents, nDests = 40, 4
	tmp := t.TempDir()

	n := newNATSEnv(t)
	cfg := filepath.Join(tmp, "distributor.yaml")
	var y strings.Builder
	fmt.Fprintf(&y, "nats:\n  url: %s\npipelines:\n  - id: load.test\n    destinations: [", n.url)
	for i := range nDests {
		if i > 0 {
			y.WriteString(", ")
		}
		fmt.Fprintf(&y, "r%d", i)
	}
	y.WriteString("]\ndestinations:\n")
	for i := range nDests {
		root := filepath.Join(tmp, "roots", fmt.Sprint(i))
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&y, "  - id: r%d\n    backend: local\n    path: %s\n", i, root)
	}
	if err := os.WriteFile(cfg, []byte(y.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	type proc struct {
		cmd    *exec.Cmd
		stderr *testenv.SyncBuffer
		done   chan error
	}
	procs := make([]*proc, 2)
	for i := range procs {
		p := &proc{stderr: &testenv.SyncBuffer{}, done: make(chan error, 1)}
		p.cmd = exec.Command(bin, "serve", "--config", cfg, "--log-format", "json", "--http-addr", "127.0.0.1:0")
		p.cmd.Stderr = p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait() }()
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		})
		procs[i] = p
	}
	for _, p := range procs {
		testenv.Eventually(t, 15*time.Second, func() bool { return strings.Contains(p.stderr.String(), "consuming bundle-ready events") },
			"serve %d to consume", p.cmd.Process.Pid)
	}

	ctx := context.Background()
	js := n.nats.JetStream(t)
	streams, err := events.Setup(ctx, js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, streams.Subjects)
	ids := map[string]int{}
	start := time.Now()
	for i := range nEvents {
		dir := filepath.Join(tmp, "bundles", fmt.Sprint(i))
		// One source per bundle: versions of one source would (rightly)
		// supersede each other when processed out of order.
		digest := testenv.WriteBundle(t, dir, fmt.Sprintf("load.src%02d", i), time.Now().UTC().Truncate(time.Second),
			map[string]string{fmt.Sprintf("n%02d.txt", i): fmt.Sprintf("bundle %d\n", i)})
		ev := events.BundleReady{ID: fmt.Sprintf("load-%02d", i), PipelineID: "load.test", Bundle: dir, ManifestDigest: digest}
		if _, _, err := pub.AnnounceBundle(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ids[ev.ID] = i
	}

	// Wait for every result, then read the whole stream once more to count.
	want := nEvents * nDests
	cons, err := streams.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]int{} // "<event>/<dest>/<type>" → count
	got := 0
	waitUntil := time.Now().Add(45 * time.Second)
	for got < want && time.Now().Before(waitUntil) {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			r, err := events.DecodeResult(msg.Data())
			if err != nil {
				t.Fatalf("undecodable result event: %v", err)
			}
			if r.Type != events.TypePublished {
				t.Errorf("%s event for %s/%s: %s %s", r.Type, r.BundleEventID, r.DestinationID, r.Reason, r.Message)
			}
			results[r.BundleEventID+"/"+r.DestinationID+"/"+r.Type]++
			got++
		}
	}
	elapsed := time.Since(start)
	if got < want {
		var retries []int
		for _, p := range procs {
			retries = append(retries, strings.Count(p.stderr.String(), "transient failure; will retry"))
		}
		t.Fatalf("%d of %d result events after 45s; transient-failure retries per process: %v", got, want, retries)
	}
	for id := range ids {
		for d := range nDests {
			if k := fmt.Sprintf("%s/r%d/published", id, d); results[k] != 1 {
				t.Errorf("%s: %d published events, want 1", k, results[k])
			}
		}
	}
	for d := range nDests {
		root := filepath.Join(tmp, "roots", fmt.Sprint(d))
		if paths := catalogPaths(t, root); len(paths) != nEvents {
			t.Errorf("root r%d catalog has %d outputs, want %d", d, len(paths), nEvents)
		}
	}

	// Both processes did work: count their "result" log lines.
	var perProc []int
	total := 0
	for _, p := range procs {
		c := 0
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var line struct {
				Message, Type string
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "result" && line.Type == events.TypePublished {
				c++
			}
		}
		perProc = append(perProc, c)
		total += c
	}
	t.Logf("%d events × %d destinations over 2 serve processes in %s; published results logged per process: %v", nEvents, nDests, elapsed.Round(time.Millisecond), perProc)
	if slices.Contains(perProc, 0) {
		t.Errorf("one process did no work: result lines per process %v", perProc)
	}
	if total < want {
		t.Errorf("%d result log lines in all, want at least %d", total, want)
	}

	stopStart := time.Now()
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("serve pid %d after SIGTERM: %v\n%s", p.cmd.Process.Pid, err, p.stderr.String())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("serve pid %d still running 5s after SIGTERM", p.cmd.Process.Pid)
		}
	}
	t.Logf("both stopped %s after SIGTERM", time.Since(stopStart).Round(time.Millisecond))

	// Both processes have exited, so no duplicate can still arrive: the
	// durable has every bundle event acknowledged and the events stream
	// holds exactly one result per event and destination.
	dur, err := js.Consumer(ctx, streams.Subjects.BundlesStream(), streams.Subjects.Durable())
	if err != nil {
		t.Fatal(err)
	}
	ci, err := dur.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumPending != 0 || ci.NumAckPending != 0 {
		t.Errorf("durable after both stopped: %d pending, %d unacknowledged; want none", ci.NumPending, ci.NumAckPending)
	}
	info, err := streams.Events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(want) {
		t.Errorf("events stream holds %d events, want exactly %d", info.State.Msgs, want)
	}
}

// TestWaitResultsEndedBeforeReading: a wait whose context ends before the
// results reader has started (an interrupt or the timeout right after the
// announce, on a slow machine) reports "interrupted" or "timed out", never
// the reader's raw context error.
func TestWaitResultsEndedBeforeReading(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	streams, err := events.Setup(context.Background(), e.nats.JetStream(t), events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ev := events.BundleReady{ID: "ev1", PipelineID: "p.one"}
	interrupted, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = waitResults(interrupted, streams, ev, time.Now(), resultWait{results: 2, timeout: time.Minute})
	if err == nil || !strings.HasPrefix(err.Error(), "interrupted while waiting for results of ev1 (0 of 2)") {
		t.Errorf("interrupted before reading: %v, want the interrupted message", err)
	}
	_, err = waitResults(context.Background(), streams, ev, time.Now(), resultWait{results: 2, timeout: time.Nanosecond})
	if err == nil || !strings.HasPrefix(err.Error(), "timed out after 1ns waiting for results of ev1 (0 of 2)") {
		t.Errorf("timed out before reading: %v, want the timed-out message", err)
	}
}

// placedOnCluster places the R3 streams, lease bucket and durable on cl as
// serve configures them, retrying, and returns a configuration naming cl
// with nats.replicas 3. The first placement on a fresh cluster can
// outlast serve's 5 s API timeout on a busy machine; serve then finds
// them as configured.
func placedOnCluster(t *testing.T, cl *testenv.Cluster) *natsEnv {
	t.Helper()
	ctx := context.Background()
	js := cl.JetStream(t)
	var st *events.Streams
	testenv.Retry(t, time.Minute, func() (err error) {
		st, err = events.Setup(ctx, js, events.SetupConfig{Replicas: 3})
		return err
	}, "placing the R3 streams")
	e := writeNATSConfig(t, "  url: "+cl.URLs+"\n  replicas: 3\n")
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	durable := consumer.New(js, st.Subjects, nil, consumerOptions(cfg, 1, zerolog.Nop()))
	testenv.Retry(t, time.Minute, func() error { _, err := durable.Durable(ctx); return err }, "placing the R3 durable")
	return e
}

// TestServeComesUpOnAClusterThatGainsQuorumLate: serve started while only
// 1 of 3 nodes of a fresh cluster runs (no meta leader: nothing can be
// created) does not exit: it retries the set-up, logs why at warn, and is
// not consuming; once the other two nodes return it creates the R3
// streams and its durable by itself and publishes.
func TestServeComesUpOnAClusterThatGainsQuorumLate(t *testing.T) {
	// Not parallel: see TestServeOnCluster.
	cl := testenv.NewCluster(t)
	e := writeNATSConfig(t, "  url: "+cl.URLs+"\n  replicas: 3\n")
	cl.Kill(1)
	cl.Kill(2)

	sctx, cancel := context.WithCancel(context.Background())
	stderr := &testenv.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, []string{"serve", "--config", e.cfg, "--http-addr", "127.0.0.1:0"}, &testenv.SyncBuffer{}, stderr)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop within 15s: %s", stderr.String())
		}
	}()
	testenv.Eventually(t, time.Minute, func() bool {
		return strings.Contains(stderr.String(), "JetStream does not answer")
	}, "serve to retry its set-up without quorum")
	select {
	case code := <-done:
		t.Fatalf("serve exited %d without quorum, want it to wait: %s", code, stderr.String())
	default:
	}
	if strings.Contains(stderr.String(), "consuming bundle-ready events") {
		t.Fatalf("serve consuming without quorum: %s", stderr.String())
	}
	cl.Restart(1)
	cl.Restart(2)
	up := func() bool { return strings.Contains(stderr.String(), "consuming bundle-ready events") }
	for deadline := time.Now().Add(2 * time.Minute); !up(); time.Sleep(50 * time.Millisecond) {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d once the cluster was back: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not consuming 2m after the cluster was back: %s", stderr.String())
		}
	}
	// publish asks the streams' leaders: wait until they are elected and
	// current after the restarts (see TestServeOnCluster).
	for _, name := range []string{"DISTRIBUTOR_BUNDLES", "DISTRIBUTOR_EVENTS"} {
		cl.WaitStreamLeader(t, name)
		cl.WaitStreamCurrent(t, name)
	}
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, errOut := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish once the cluster is back: exit %d\n%s%s", code, stdout, errOut)
	}
	assertBlocks(t, "publish --wait", stdout, "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")
}

// Set-up errors that say JetStream did not answer (yet) are retried;
// others end serve at once.
func TestJetStreamUnanswered(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("set up stream X: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}, true},
		{jetstream.ErrJetStreamNotEnabled, false},
		{jetstream.ErrJetStreamNotEnabledForAccount, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{errors.New("nats: permissions violation for publish to \"$JS.API.STREAM.INFO.X\""), false},
	} {
		if got := jetStreamUnanswered(c.err); got != c.want {
			t.Errorf("jetStreamUnanswered(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// TestServeGivesUpWaitingForJetStreamAtConnectTimeout: with
// --connect-timeout, serve on a cluster without quorum gives up after it
// with exit 1 and one line naming the timeout.
func TestServeGivesUpWaitingForJetStreamAtConnectTimeout(t *testing.T) {
	// Not parallel: see TestServeOnCluster.
	cl := testenv.NewCluster(t)
	e := writeNATSConfig(t, "  url: "+cl.URLs+"\n  replicas: 3\n")
	cl.Kill(1)
	cl.Kill(2)
	start := time.Now()
	code, _, stderr := e.cmd(t, "serve", "--http-addr", "127.0.0.1:0", "--connect-timeout", "3s")
	if code != 1 || !strings.Contains(stderr, "gave up after 3s (--connect-timeout)") {
		t.Fatalf("serve without quorum, --connect-timeout 3s: exit %d after %s\n%s", code, time.Since(start), stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("serve gave up after %s, want about 3s (plus one API timeout)", took)
	}
}

// TestTwoServesStartAtOnceOnAFreshCluster: two serve processes started
// together on a fresh 3-node cluster race to create the same R3 streams,
// bucket and durable; neither exits, both come up and consume.
func TestTwoServesStartAtOnceOnAFreshCluster(t *testing.T) {
	// Not parallel: see TestServeOnCluster.
	cl := testenv.NewCluster(t)
	e := writeNATSConfig(t, "  url: "+cl.URLs+"\n  replicas: 3\n")
	type serve struct {
		stderr *testenv.SyncBuffer
		done   chan int
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serves []serve
	for range 2 {
		s := serve{stderr: &testenv.SyncBuffer{}, done: make(chan int, 1)}
		go func() {
			s.done <- run(ctx, []string{"serve", "--config", e.cfg, "--http-addr", "127.0.0.1:0"}, &testenv.SyncBuffer{}, s.stderr)
		}()
		serves = append(serves, s)
	}
	defer func() {
		cancel()
		for _, s := range serves {
			select {
			case <-s.done:
			case <-time.After(15 * time.Second):
				t.Errorf("serve did not stop within 15s: %s", s.stderr.String())
			}
		}
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		up := 0
		for i, s := range serves {
			select {
			case code := <-s.done:
				t.Fatalf("serve %d exited %d while starting beside another: %s", i, code, s.stderr.String())
			default:
			}
			if strings.Contains(s.stderr.String(), "consuming bundle-ready events") {
				up++
			}
		}
		if up == len(serves) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 2 serve processes consuming after 2m:\n%s\n---\n%s", up, serves[0].stderr.String(), serves[1].stderr.String())
		}
	}
}
