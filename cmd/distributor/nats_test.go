package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/testenv"
)

// These tests drive the NATS-facing commands through run(), against a real
// embedded JetStream server (testenv) and local destinations in temp folders.

// runCmd runs the CLI in-process and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCmdAt(t, nil, args...)
}

// runCmdAt is runCmd with the clock now (nil: the real one).
func runCmdAt(t *testing.T, now func() time.Time, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	a := newApp(&out, &errb)
	a.now = now
	code = a.run(ctx, args)
	return code, out.String(), errb.String()
}

// natsEnv is one configuration file over temp destination roots:
//
//	p.one → d1, d2 (additive unless setWorkflow, separate roots)
//	p.two → d3
type natsEnv struct {
	dir   string
	cfg   string // configuration file
	url   string // NATS client URL ("" without nats.url)
	nats  *testenv.NATS
	roots map[string]string
}

// newNATSEnv starts a JetStream server and writes a configuration whose
// nats.url points at it.
func newNATSEnv(t *testing.T) *natsEnv {
	t.Helper()
	n := testenv.NewNATS(t)
	e := writeNATSConfig(t, "  url: "+n.URL+"\n")
	e.url, e.nats = n.URL, n
	return e
}

// newOfflineEnv writes a configuration without nats.url whose nats.listen is
// a free port nothing listens on: no NATS is reachable.
func newOfflineEnv(t *testing.T) (*natsEnv, string) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	return writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n"), addr
}

func writeNATSConfig(t *testing.T, natsBlock string) *natsEnv {
	t.Helper()
	dir := t.TempDir()
	e := &natsEnv{dir: dir, cfg: filepath.Join(dir, "distributor.yaml"), roots: map[string]string{}}
	var b strings.Builder
	b.WriteString("nats:\n" + natsBlock)
	// Both pipelines' bundles come from makeBundle's folder.
	in := filepath.Join(dir, "bundles")
	fmt.Fprintf(&b, "pipelines:\n  - id: p.one\n    destinations: [d1, d2]\n    bundle_locations: [%q]\n  - id: p.two\n    destinations: [d3]\n    bundle_locations: [%q]\ndestinations:\n", in, in)
	for _, d := range []string{"d1", "d2", "d3"} {
		root := filepath.Join(dir, "roots", d)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		e.roots[d] = root
		fmt.Fprintf(&b, "  - id: %s\n    backend: local\n    path: %s\n", d, root)
	}
	if err := os.WriteFile(e.cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// setWorkflow gives destination d workflow wf in the configuration file
// (before serve reads it).
func (e *natsEnv) setWorkflow(t *testing.T, d, wf string) {
	t.Helper()
	data, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	line := "    path: " + e.roots[d] + "\n"
	if !strings.Contains(string(data), line) {
		t.Fatalf("no destination %s in %s", d, data)
	}
	data = []byte(strings.Replace(string(data), line, line+"    workflow: "+wf+"\n", 1))
	if err := os.WriteFile(e.cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeBundle writes files into a new folder and runs `bundle create` on it,
// with the extra create flags (--created) if any.
func (e *natsEnv) makeBundle(t *testing.T, name, id string, files map[string]string, create ...string) string {
	t.Helper()
	dir := filepath.Join(e.dir, "bundles", name)
	testenv.WriteFiles(t, dir, files)
	if code, _, stderr := runCmd(t, append([]string{"bundle", "create", dir, "--id", id}, create...)...); code != 0 {
		t.Fatalf("bundle create %s: exit %d: %s", dir, code, stderr)
	}
	return dir
}

// cmd runs a command with --config appended.
func (e *natsEnv) cmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCmd(t, append(args, "--config", e.cfg)...)
}

// serveHandle is a `serve` running in-process.
type serveHandle struct {
	cancel context.CancelFunc
	done   chan int
	stderr *testenv.SyncBuffer
	code   int
	exited bool
}

// serveStartWait bounds startServe's wait for serve to consume: a
// set-up attempt waits up to setupAttemptTimeout for JetStream (a
// request a cluster electing a stream leader leaves unanswered), then
// serve retries.
const serveStartWait = 4 * setupAttemptTimeout

// startServe runs `serve --config cfg` in a goroutine until stopServe (or
// the end of the test) cancels its context, as SIGINT does.
func startServe(t *testing.T, cfg string, extra ...string) *serveHandle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serveHandle{cancel: cancel, done: make(chan int, 1), stderr: &testenv.SyncBuffer{}}
	// A free port for /metrics unless the test picks one: tests run
	// beside each other and other serve processes.
	args := append([]string{"serve", "--config", cfg, "--http-addr", "127.0.0.1:0"}, extra...)
	go func() { s.done <- run(ctx, args, &testenv.SyncBuffer{}, s.stderr) }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(serveStartWait)
	for !strings.Contains(s.stderr.String(), "consuming bundle-ready events") {
		select {
		case code := <-s.done:
			s.code, s.exited = code, true
			t.Fatalf("serve exited %d before consuming: %s", code, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not consuming after %s: %s", serveStartWait, s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// stop cancels serve and returns its exit code; it must stop within 10 s.
func (s *serveHandle) stop(t *testing.T) int {
	t.Helper()
	if s.exited {
		return s.code
	}
	s.cancel()
	select {
	case s.code = <-s.done:
		s.exited = true
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not stop within 10s of its context ending: %s", s.stderr.String())
	}
	return s.code
}

var eventTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+`)

// eventBlocks returns the event lines printed by printEvent, each with its
// output lines, the time stripped and runs of spaces collapsed, sorted
// (events of one bundle arrive in any order). Other lines are ignored.
func eventBlocks(out string) []string {
	var blocks []string
	for line := range strings.SplitSeq(out, "\n") {
		switch {
		case eventTimeRE.MatchString(line):
			blocks = append(blocks, strings.Join(strings.Fields(eventTimeRE.ReplaceAllString(line, "")), " "))
		case strings.HasPrefix(line, "    ") && len(blocks) > 0:
			blocks[len(blocks)-1] += " | " + strings.TrimSpace(line)
		}
	}
	sort.Strings(blocks)
	return blocks
}

func assertBlocks(t *testing.T, what, out string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := eventBlocks(out); !slices.Equal(got, want) {
		t.Errorf("%s: events\n got %q\nwant %q\noutput:\n%s", what, got, want, out)
	}
}

var announcedRE = regexp.MustCompile(`(?m)^announced (\S+): pipeline (\S+), bundle (\S+), seq (\d+)$`)

// announcedID returns the bundle event id from publish's first line.
func announcedID(t *testing.T, stdout string) string {
	t.Helper()
	m := announcedRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no announced line in:\n%s", stdout)
	}
	return m[1]
}

// tailJSON runs `events tail --json` with args and decodes every line.
func (e *natsEnv) tailJSON(t *testing.T, args ...string) []events.Result {
	t.Helper()
	code, stdout, stderr := e.cmd(t, append([]string{"events", "tail", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("events tail %v: exit %d: %s", args, code, stderr)
	}
	var out []events.Result
	for line := range strings.SplitSeq(strings.TrimSuffix(stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		r, err := events.DecodeResult([]byte(line))
		if err != nil {
			t.Fatalf("events tail --json printed an undecodable line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// waitEvent polls `events tail --json` until an event matches.
func (e *natsEnv) waitEvent(t *testing.T, match func(events.Result) bool, args ...string) events.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, r := range e.tailJSON(t, args...) {
			if match(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching event after 20s (events tail %v)", args)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastAdminEvent is the last operator request stored for pipeline.
func (e *natsEnv) lastAdminEvent(t *testing.T, pipeline string) events.BundleReady {
	t.Helper()
	msg, err := e.bundleStream(t).GetLastMsgForSubject(context.Background(), events.Subjects{}.AdminBundleReady(pipeline))
	if err != nil {
		t.Fatalf("no operator request for %s on the admin subject: %v", pipeline, err)
	}
	ev, err := events.DecodeBundleReady(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// bundleMsgs is the number of messages in the bundle-ready stream.
func (e *natsEnv) bundleMsgs(t *testing.T) uint64 {
	t.Helper()
	st := e.bundleStream(t)
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func (e *natsEnv) bundleStream(t *testing.T) jetstream.Stream {
	t.Helper()
	st, err := e.nats.JetStream(t).Stream(context.Background(), events.Subjects{}.BundlesStream())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readCatalog parses the root's .distributor.json.
func readCatalog(t *testing.T, root string) *catalog.Catalog {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cat, legacy, err := catalog.Parse(data)
	if err != nil || legacy || cat == nil {
		t.Fatalf("catalog in %s: legacy %v, err %v", root, legacy, err)
	}
	return cat
}

func catalogPaths(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, o := range readCatalog(t, root).Outputs {
		out = append(out, o.Path)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var bundleOne = map[string]string{"report.md": "# one\n", "data.csv": "a,b\n1,2\n"}

func TestEventsTailFiltersByTypeAndPipeline(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	// A follower started before anything happened sees p.two's event.
	followCtx, stopFollow := context.WithCancel(context.Background())
	defer stopFollow()
	var follow testenv.SyncBuffer
	followDone := make(chan int, 1)
	go func() {
		followDone <- run(followCtx, []string{"events", "tail", "--follow", "--pipeline", "p.two", "--config", e.cfg}, &follow, &follow)
	}()

	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish p.one: exit %d\n%s%s", code, stdout, stderr)
	}
	id1 := announcedID(t, stdout)
	// Other events the filters must leave out: another pipeline's
	// publication and a failure of p.one.
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1); code != 0 {
		t.Fatalf("publish p.two: exit %d\n%s%s", code, stdout, stderr)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return strings.Contains(follow.String(), "p.two") }, "events tail --follow to print p.two")
	stopFollow()
	select {
	case code := <-followDone:
		if code != 0 {
			t.Errorf("events tail --follow: exit %d after Ctrl-C, want 0", code)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("events tail --follow still running 2s after its context ended")
	}
	assertBlocks(t, "events tail --follow --pipeline p.two", follow.String(), "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")

	if err := os.WriteFile(filepath.Join(e.roots["d2"], "extra.txt"), []byte("unmanaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	b2 := e.makeBundle(t, "b2", "src.one", map[string]string{"extra.txt": "managed"})
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b2); code != exitRefused {
		t.Fatalf("publish b2: exit %d, want %d\n%s%s", code, exitRefused, stdout, stderr)
	}

	code, stdout, stderr = e.cmd(t, "events", "tail", "--type", "published", "--pipeline", "p.one")
	if code != 0 || stderr != "" {
		t.Fatalf("events tail: exit %d: %s", code, stderr)
	}
	// d1 got both bundles (its second publication wrote extra.txt).
	assertBlocks(t, "events tail --type published --pipeline p.one", stdout,
		"published d1 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
		"published d2 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
		"published d1 p.one written 1, unchanged 0, deleted 0 | + extra.txt",
	)
	if n := strings.Count(stdout, "\n"); n != 3+5 {
		t.Errorf("events tail printed %d lines, want 8 (3 events, 5 outputs):\n%s", n, stdout)
	}

	all := e.tailJSON(t, "--type", "published", "--pipeline", "p.one")
	if len(all) != 3 {
		t.Fatalf("--json printed %d events, want 3: %+v", len(all), all)
	}
	for _, r := range all {
		if r.Type != events.TypePublished || r.PipelineID != "p.one" || r.Source == nil || r.Source.ID != "src.one" {
			t.Errorf("--json event %+v: want a published event of p.one with source src.one", r)
		}
	}
	if r := all[0]; r.BundleEventID != id1 || r.ID != id1+"."+r.DestinationID {
		t.Errorf("first event: bundle_event_id %q id %q, want %q and its deterministic id", r.BundleEventID, r.ID, id1)
	}

	// Destination and type filters combine.
	col := e.tailJSON(t, "--type", "collision", "--destination", "d2")
	if len(col) != 1 || !slices.Equal(col[0].Collisions, []string{"extra.txt"}) || col[0].Original == nil {
		t.Errorf("collision events of d2: %+v, want one naming extra.txt with its original event", col)
	}
	if got := e.tailJSON(t, "--pipeline", "p.two"); len(got) != 1 || got[0].DestinationID != "d3" {
		t.Errorf("events of p.two: %+v, want the one published to d3", got)
	}
	if got := e.tailJSON(t, "--type", "failed"); len(got) != 0 {
		t.Errorf("failed events: %+v, want none", got)
	}
	if code, _, stderr := e.cmd(t, "events", "tail", "--type", "done"); code != exitUsage || !strings.Contains(stderr, `--type "done"`) {
		t.Errorf("--type done: exit %d, stderr %q; want a usage error naming the flag", code, stderr)
	}
}

func TestReplayAfterCollision(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	stray := filepath.Join(e.roots["d1"], "report.md")
	if err := os.WriteFile(stray, []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != exitRefused {
		t.Fatalf("publish: exit %d, want %d\n%s%s", code, exitRefused, stdout, stderr)
	}
	orig := announcedID(t, stdout)

	// A replay before the cause is fixed collides again; the next replay
	// folds both collisions into one replay of the original.
	code, stdout, stderr = e.cmd(t, "replay")
	first := regexp.MustCompile(`^replayed (\S+) as (\S+) \(destinations \[d1\]\)\n$`).FindStringSubmatch(stdout)
	if code != 0 || first == nil || first[1] != orig {
		t.Fatalf("first replay: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	again := e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == first[2] }, "--type", "collision")
	if again.Original == nil || again.Original.ReplayOf != orig {
		t.Fatalf("collision of the first replay: %+v, want its original to replay %s", again, orig)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}

	before := e.bundleMsgs(t)
	code, stdout, stderr = e.cmd(t, "replay", "--dry-run")
	if code != 0 {
		t.Fatalf("replay --dry-run: exit %d: %s", code, stderr)
	}
	if want := fmt.Sprintf("would replay %s (pipeline p.one, bundle %s, destinations [d1])\n", orig, b1); stdout != want {
		t.Errorf("replay --dry-run printed %q, want %q", stdout, want)
	}
	if after := e.bundleMsgs(t); after != before {
		t.Errorf("replay --dry-run announced something: %d bundle-ready messages, was %d", after, before)
	}

	code, stdout, stderr = e.cmd(t, "replay")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`^replayed (\S+) as (\S+) \(destinations \[d1\]\)\n$`).FindStringSubmatch(stdout)
	if m == nil || m[1] != orig {
		t.Fatalf("replay printed %q, want one replayed line for %s", stdout, orig)
	}
	replayID := m[2]
	if replayID == orig {
		t.Fatalf("the replay reused the original id %s (it would be dropped as a duplicate)", orig)
	}
	if after := e.bundleMsgs(t); after != before+1 {
		t.Errorf("replay: %d bundle-ready messages, want %d", after, before+1)
	}
	msg, err := e.bundleStream(t).GetLastMsgForSubject(context.Background(), events.Subjects{}.BundleReady("p.one"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.DecodeBundleReady(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != replayID || ev.ReplayOf != orig || !slices.Equal(ev.Destinations, []string{"d1"}) || ev.Bundle != b1 || ev.TakeOwnership {
		t.Errorf("replayed event %+v: want id %s, replay_of %s, destinations [d1], bundle %s, no take_ownership", ev, replayID, orig, b1)
	}

	r := e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == replayID },
		"--type", "published", "--pipeline", "p.one", "--destination", "d1")
	if r.Written != 2 || len(r.Adopted) != 0 {
		t.Errorf("replay's published event: written %d, adopted %v; want 2 and none", r.Written, r.Adopted)
	}
	if got := readFile(t, filepath.Join(e.roots["d1"], "report.md")); got != bundleOne["report.md"] {
		t.Errorf("d1/report.md = %q after the replay, want the bundle's bytes", got)
	}
	code, stdout, _ = e.cmd(t, "events", "tail", "--type", "published", "--destination", "d1")
	if code != 0 {
		t.Fatalf("events tail: exit %d", code)
	}
	assertBlocks(t, "events tail after replay", stdout, "published d1 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md")

	// The collision is resolved: replaying again must not re-announce the
	// old bundle (it could roll back newer content).
	code, stdout, stderr = e.cmd(t, "replay")
	if code != 0 || !strings.Contains(stdout, "nothing to replay") {
		t.Errorf("second replay: exit %d, stdout %q, stderr %q; want nothing to replay", code, stdout, stderr)
	}
	if after := e.bundleMsgs(t); after != before+1 {
		t.Errorf("second replay announced again: %d bundle-ready messages, want %d", after, before+1)
	}

	code, stdout, stderr = e.cmd(t, "replay", "--reason", "max_deliveries")
	if code != 0 || stdout != "nothing to replay: no failed or collision event matches\n" || stderr != "" {
		t.Errorf("replay --reason max_deliveries: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestReplayTakeOwnershipAdoptsCollidingPath(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	stray := filepath.Join(e.roots["d2"], "data.csv")
	if err := os.WriteFile(stray, []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != exitRefused {
		t.Fatalf("publish: exit %d, want %d\n%s%s", code, exitRefused, stdout, stderr)
	}
	orig := announcedID(t, stdout)

	// --allow-older is an operator flag too: it travels on the admin
	// subject and is accepted there (it does not adopt).
	code, stdout, stderr = e.cmd(t, "replay", "--allow-older", "--id", orig, "--destination", "d2")
	if code != 0 || !strings.HasPrefix(stdout, "replayed "+orig+" as ") {
		t.Fatalf("replay --allow-older: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	olderID := strings.TrimSuffix(strings.TrimPrefix(stdout, "replayed "+orig+" as "), " (destinations [d2])\n")
	ev := e.lastAdminEvent(t, "p.one")
	if ev.ID != olderID || !ev.AllowOlder || ev.TakeOwnership || ev.ReplayOf != orig {
		t.Fatalf("replay --allow-older stored %+v on the admin subject, want id %s with allow_older only", ev, olderID)
	}
	r := e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == olderID }, "--destination", "d2")
	if r.Type != events.TypeCollision || r.Original == nil || !r.Original.AllowOlder {
		t.Fatalf("replay --allow-older: %s (%s %s), want a collision of the accepted request", r.Type, r.Reason, r.Message)
	}

	code, stdout, stderr = e.cmd(t, "replay", "--take-ownership", "--id", orig, "--destination", "d2")
	if code != 0 || !strings.HasPrefix(stdout, "replayed "+orig+" as ") {
		t.Fatalf("replay --take-ownership: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	takeID := strings.TrimSuffix(strings.TrimPrefix(stdout, "replayed "+orig+" as "), " (destinations [d2])\n")
	if ev := e.lastAdminEvent(t, "p.one"); ev.ID != takeID || !ev.TakeOwnership || ev.AllowOlder {
		t.Fatalf("replay --take-ownership stored %+v on the admin subject, want id %s with take_ownership only", ev, takeID)
	}
	r = e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == takeID },
		"--type", "published", "--destination", "d2")
	if !slices.Equal(r.Adopted, []string{"data.csv"}) || r.Written != 2 {
		t.Errorf("published event after --take-ownership: adopted %v, written %d; want [data.csv] and 2", r.Adopted, r.Written)
	}
	if got := readFile(t, stray); got != bundleOne["data.csv"] {
		t.Errorf("adopted d2/data.csv = %q, want the bundle's bytes", got)
	}
	if got := catalogPaths(t, e.roots["d2"]); !slices.Equal(got, []string{"data.csv", "report.md"}) {
		t.Errorf("d2 catalog paths %v after adoption", got)
	}
}

// backdate moves every record of the root's catalog a year back, so that
// prune has something older than its cutoff.
func backdate(t *testing.T, root string) {
	t.Helper()
	cat := readCatalog(t, root)
	old := time.Now().UTC().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	for i := range cat.Outputs {
		cat.Outputs[i].CreatedAt, cat.Outputs[i].UpdatedAt = old, old
	}
	data, err := catalog.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, catalog.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMaintenanceWithNATSPublishesEvents(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.one", "--bundle", b1); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	backdate(t, e.roots["d1"])
	code, stdout, stderr := e.cmd(t, "prune", "--pipeline", "p.one", "--destination", "d1", "--older-than", "30d")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "pruned 2 output(s) of p.one/d1") {
		t.Errorf("prune printed:\n%s", stdout)
	}
	if err := os.Remove(filepath.Join(e.roots["d2"], "data.csv")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = e.cmd(t, "reconcile-state", "--pipeline", "p.one", "--destination", "d2")
	if code != 0 {
		t.Fatalf("reconcile-state: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, _ = e.cmd(t, "events", "tail")
	if code != 0 {
		t.Fatalf("events tail: exit %d", code)
	}
	// apply reports its publication too when NATS answers.
	assertBlocks(t, "events tail", stdout,
		"published d1 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
		"published d2 p.one written 2, unchanged 0, deleted 0 | + data.csv | + report.md",
		"pruned d1 p.one deleted 2, removed 0 | - data.csv | - report.md",
		"reconciled d2 p.one deleted 0, removed 1 | - data.csv",
	)
	if got := catalogPaths(t, e.roots["d2"]); !slices.Equal(got, []string{"report.md"}) {
		t.Errorf("d2 catalog after reconcile: %v, want [report.md]", got)
	}
	if got := readCatalog(t, e.roots["d1"]).Outputs; len(got) != 0 {
		t.Errorf("d1 catalog after prune: %v, want empty", got)
	}
	// A dry run changes nothing and reports nothing.
	if code, _, stderr := e.cmd(t, "reconcile-state", "--all-owners", "--dry-run"); code != 0 {
		t.Fatalf("reconcile-state --dry-run: exit %d: %s", code, stderr)
	}
	if got := e.tailJSON(t); len(got) != 4 {
		t.Errorf("%d events after a dry run, want still 4", len(got))
	}
}

func TestMaintenanceWithoutNATSUsesLockObject(t *testing.T) {
	t.Parallel()
	e, _ := newOfflineEnv(t)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.one", "--bundle", b1); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	backdate(t, e.roots["d1"])

	// A live holder's lock object in the root holds the direct-mode run
	// back until the holder releases it (its expiry within the longest
	// lease: a later one would be a clock that ran ahead).
	lock := filepath.Join(e.roots["d1"], filepath.FromSlash(lease.LockPath))
	now := time.Now().UTC()
	held, _ := json.Marshal(map[string]any{"holder": "apply on another host", "host": "elsewhere.example", "pid": 1,
		"acquired": now, "expires": now.Add(lease.MaxTTL), "generation": 1})
	if err := os.WriteFile(lock, held, 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	hooks := &hookStores{after: func() {}}
	go func() {
		var out, errb bytes.Buffer
		a := newApp(&out, &errb)
		a.wrapStores = func(s service.Stores) service.Stores { hooks.Stores = s; return hooks }
		code := a.run(context.Background(), []string{"prune", "--pipeline", "p.one", "--destination", "d1", "--older-than", "30d", "--config", e.cfg})
		done <- result{code, out.String(), errb.String()}
	}()
	// Two reads of the lock object: prune found it held and tried again.
	testenv.Eventually(t, 10*time.Second, func() bool { return hooks.lockReads.Load() >= 2 }, "prune to find the lock object held twice")
	select {
	case r := <-done:
		t.Fatalf("prune ran despite the held lock object: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	default:
	}
	if got := catalogPaths(t, e.roots["d1"]); len(got) != 2 {
		t.Fatalf("the catalog changed under a held lock object: %v", got)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("prune still waiting 15s after the lock object was removed")
	}
	if r.code != 0 || !strings.Contains(r.stdout, "pruned 2 output(s)") {
		t.Fatalf("prune in direct mode: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := readCatalog(t, e.roots["d1"]).Outputs; len(got) != 0 {
		t.Errorf("d1 catalog after prune: %v, want empty", got)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("lock object left behind after prune: %v", err)
	}
	if err := os.Remove(filepath.Join(e.roots["d2"], "report.md")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.cmd(t, "reconcile-state", "--all-owners", "--destination", "d2")
	if code != 0 || !strings.Contains(stdout, "removed 1 record(s) whose bytes are missing") {
		t.Fatalf("reconcile-state in direct mode: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := catalogPaths(t, e.roots["d2"]); !slices.Equal(got, []string{"data.csv"}) {
		t.Errorf("d2 catalog after reconcile: %v, want [data.csv]", got)
	}
}

// TestNATSCommandsWithoutKnownNATS: publish, events tail and replay use
// nats.url or the NATS a running serve of this configuration advertises,
// never nats.listen blindly: without either they fail at once with one
// line naming the fix, and a NATS server or a silent listener on
// nats.listen (a stranger's) is not dialled.
func TestNATSCommandsWithoutKnownNATS(t *testing.T) {
	t.Parallel()
	cmds := []struct {
		args []string
		want string
	}{
		{[]string{"publish", "--pipeline", "p.one", "--wait", "--timeout", "5s"}, "distributor: no NATS to publish to: set nats.url or start `distributor serve`\n"},
		{[]string{"events", "tail"}, "distributor: no NATS to read events from: set nats.url or start `distributor serve`\n"},
		{[]string{"replay"}, "distributor: no NATS to replay through: set nats.url or start `distributor serve`\n"},
		{[]string{"history", "--destination", "d1"}, "distributor: no NATS to read the history from: set nats.url or start `distributor serve` (`distributor status` shows what the destination holds without it)\n"},
	}
	check := func(t *testing.T, e *natsEnv) {
		t.Helper()
		b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
		for _, c := range cmds {
			args := c.args
			if args[0] == "publish" {
				args = append(slices.Clone(args), "--bundle", b1)
			}
			start := time.Now()
			code, stdout, stderr := e.cmd(t, args...)
			if code != exitFailed || stdout != "" || stderr != c.want {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", c.args[:2], code, stdout, stderr, exitFailed, c.want)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("%v took %s, want at once", c.args[:2], took)
			}
		}
	}
	t.Run("nothing listens", func(t *testing.T) {
		e, _ := newOfflineEnv(t)
		check(t, e)
	})
	t.Run("a foreign NATS on nats.listen", func(t *testing.T) {
		foreign := testenv.NewNATS(t)
		e := writeNATSConfig(t, "  listen: "+strings.TrimPrefix(foreign.URL, "nats://")+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n")
		check(t, e)
		info, err := foreign.JetStream(t).AccountInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.Streams != 0 {
			t.Errorf("the foreign server has %d stream(s), want 0", info.Streams)
		}
	})
	t.Run("a silent listener on nats.listen", func(t *testing.T) {
		addr, accepted := silentListener(t)
		check(t, writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n"))
		if n := accepted.Load(); n != 0 {
			t.Errorf("%d connection(s) to the listener on nats.listen, want 0", n)
		}
	})
	// With nats.url set, a server that is not there is named.
	e := writeNATSConfig(t, "  url: nats://"+testenv.FreeAddr(t)+"\n")
	if code, _, stderr := e.cmd(t, "events", "tail"); code != exitFailed || !strings.HasPrefix(stderr, "distributor: connect to NATS at nats://") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("events tail with an unreachable nats.url: exit %d, stderr %q", code, stderr)
	}
}

// A managed file that becomes a folder: the publication is published and
// its result event reports the displaced file as deleted.
func TestApplyReportsDisplacedOutputAsDeleted(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	// Two sources of one owner: the second is newer (newest wins per path).
	earlier := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for _, b := range []string{
		e.makeBundle(t, "b1", "src.v1", map[string]string{"docs": "file\n"}, "--created", earlier),
		e.makeBundle(t, "b2", "src.v2", map[string]string{"docs/index.txt": "index\n"}),
	} {
		if code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.two", "--bundle", b); code != 0 {
			t.Fatalf("apply %s: exit %d\n%s%s", b, code, stdout, stderr)
		}
	}
	code, stdout, _ := e.cmd(t, "events", "tail")
	if code != 0 {
		t.Fatalf("events tail: exit %d", code)
	}
	assertBlocks(t, "events tail", stdout,
		"published d3 p.two written 1, unchanged 0, deleted 0 | + docs",
		"published d3 p.two written 1, unchanged 0, deleted 1 | + docs/index.txt | - docs",
	)
	if got := catalogPaths(t, e.roots["d3"]); !slices.Equal(got, []string{"docs/index.txt"}) {
		t.Errorf("d3 catalog paths %v, want [docs/index.txt]", got)
	}
	if got := readFile(t, filepath.Join(e.roots["d3"], "docs", "index.txt")); got != "index\n" {
		t.Errorf("d3/docs/index.txt = %q", got)
	}
}

// TestReplayTakeOwnershipWithDocumentedPermissions: serve and the operator
// run with exactly the sets of docs/nats-permissions.md; the operator's
// publish collides and its replay --take-ownership adopts.
func TestReplayTakeOwnershipWithDocumentedPermissions(t *testing.T) {
	t.Parallel()
	users := testenv.NATSUsersFromDoc(t, "../../docs/nats-permissions.md")
	n := testenv.NewNATSWithUsers(t, append([]*server.User{{Username: "test", Password: "test"}}, users...))
	e := writeNATSConfig(t, "  url: "+n.URL+"\n  user: serve\n  password: serve-secret\n")
	e.url, e.nats = n.URL, n
	data, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	op := *e
	op.cfg = filepath.Join(e.dir, "operator.yaml")
	if err := os.WriteFile(op.cfg, []byte(strings.Replace(string(data), "user: serve\n  password: serve-secret", "user: operator\n  password: operator-secret", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	stray := filepath.Join(e.roots["d2"], "data.csv")
	if err := os.WriteFile(stray, []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := op.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != exitRefused {
		t.Fatalf("publish as operator: exit %d, want %d\n%s%s", code, exitRefused, stdout, stderr)
	}
	orig := announcedID(t, stdout)
	code, stdout, stderr = op.cmd(t, "replay", "--take-ownership", "--id", orig, "--destination", "d2")
	if code != 0 || !strings.HasPrefix(stdout, "replayed "+orig+" as ") {
		t.Fatalf("replay --take-ownership as operator: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	r := op.waitEvent(t, func(r events.Result) bool { return r.BundleEventID != orig }, "--type", "published", "--destination", "d2")
	if !slices.Equal(r.Adopted, []string{"data.csv"}) || r.Written != 2 {
		t.Errorf("published event after --take-ownership: adopted %v, written %d; want [data.csv] and 2", r.Adopted, r.Written)
	}
	if got := readFile(t, stray); got != bundleOne["data.csv"] {
		t.Errorf("adopted d2/data.csv = %q, want the bundle's bytes", got)
	}

	// The operator's status, history and rollback (on the admin subject)
	// need nothing beyond its set.
	code, stdout, stderr = op.cmd(t, "status", "--json", "--destination", "d1")
	var st statusJSON
	decodeJSON(t, "status --json as operator", stdout, &st)
	if code != 0 || !st.NATS.Known || st.NATS.Error != "" || st.Destinations[0].LastPublished == nil || st.Destinations[0].Error != "" {
		t.Errorf("status as operator: exit %d, %s%s", code, stdout, stderr)
	}
	if code, stdout, stderr = op.cmd(t, "history", "--destination", "d1"); code != 0 || !strings.Contains(stdout, orig+".d1") {
		t.Errorf("history as operator: exit %d, %s%s", code, stdout, stderr)
	}
	if code, stdout, stderr = op.cmd(t, "rollback", "--destination", "d1", "--to", orig+".d1", "--timeout", "20s"); code != 0 {
		t.Errorf("rollback as operator: exit %d, %s%s", code, stdout, stderr)
	}
}
