package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/testenv"
)

// makeBundleAt is makeBundle with the bundle's created time.
func (e *natsEnv) makeBundleAt(t *testing.T, name, id string, created time.Time, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(e.dir, "bundles", name)
	testenv.WriteFiles(t, dir, files)
	if code, _, stderr := runCmd(t, "bundle", "create", dir, "--id", id, "--created", created.UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("bundle create %s: exit %d: %s", dir, code, stderr)
	}
	return dir
}

// publishWait runs publish --wait and wants exit code want.
func (e *natsEnv) publishWait(t *testing.T, pipeline, bundle string, want int) {
	t.Helper()
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", pipeline, "--bundle", bundle); code != want {
		t.Fatalf("publish %s: exit %d, want %d\n%s%s", bundle, code, want, stdout, stderr)
	}
}

// TestStatusHealth: three destinations in different states, on the status
// page, in /status.json and in `status`: d1 pinned by a live version from
// the future (later versions superseded), d2 locked by a live holder (and
// pinned: additive, the version from the future stays live), d3
// with a failure older than its last publication (greyed, marked stale);
// a failure of no destination has its own section. The page reloads
// itself and shows times relative to its read, absolute in a title.
func TestStatusHealth(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	e.setWorkflow(t, "d1", "replacement")
	addr := testenv.FreeAddr(t)
	startServe(t, e.cfg, "--http-addr", addr)
	base := "http://" + addr
	now := time.Now()

	// d1, d2: a version from 4 minutes ahead, then two older ones (exit
	// 3: superseded).
	e.publishWait(t, "p.one", e.makeBundleAt(t, "ahead", "src.one", now.Add(4*time.Minute), map[string]string{"a.txt": "ahead\n"}), 0)
	for i, age := range []time.Duration{time.Hour, 2 * time.Hour} {
		e.publishWait(t, "p.one", e.makeBundleAt(t, fmt.Sprintf("old%d", i), "src.one", now.Add(-age), map[string]string{"a.txt": fmt.Sprint(i)}), 3)
	}

	// d3: a failure, then a publication.
	bad := e.makeBundle(t, "bad", "src.two", map[string]string{"x.txt": "x\n"})
	if err := os.WriteFile(filepath.Join(bad, "x.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.publishWait(t, "p.two", bad, 1)
	e.publishWait(t, "p.two", e.makeBundle(t, "good", "src.two", map[string]string{"x.txt": "x\n"}), 0)

	// No destination: an event that does not decode.
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish("distributor.bundle.ready.p.one", []byte(`{"not": "an event"`)); err != nil {
		t.Fatal(err)
	}

	// d2: a live holder on another host.
	lock, _ := json.Marshal(map[string]any{"id": "9f2c4e1a7b3d5c60", "holder": "direct v1 on otherhost pid 4242", "host": "otherhost", "pid": 4242,
		"acquired": now.UTC().Format(time.RFC3339), "expires": now.Add(time.Minute).UTC().Format(time.RFC3339), "generation": 1})
	testenv.WriteFiles(t, e.roots["d2"], map[string]string{lease.LockPath: string(lock)})

	_, page := waitGet(t, base+"/", func(c int, b string) bool {
		return c == http.StatusOK && strings.Contains(b, "invalid_event") && strings.Contains(b, "locked")
	}, "the page with every state")
	if !strings.Contains(page, `<meta http-equiv="refresh" content="10">`) {
		t.Errorf("the page does not reload itself:\n%s", page)
	}
	wants := map[string][]string{
		"d1": {`<span class="pill ok" title="`, `1 published, last just now</span>`, `<span class="pill muted">0 failing</span>`,
			`<span class="pill">2 superseded</span>`, `<span class="pill warn" title="live version src.one of p.one was created `, `in the future`,
			`</td><td title="`},
		"d2": {`<span class="pill warn" title="a live holder has the root&#39;s lease">locked</span>`, `held by direct v1 on otherhost pid 4242`},
		"d3": {`<span class="pill muted">0 failing (1 failed in all)</span>`, `<dt>last failure</dt><dd class="wide stale">`,
			`failed: content_mismatch`, `(older than the last publication)</dd>`},
	}
	for d, want := range wants {
		s := section(t, page, d)
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("%s on the status page lacks %q:\n%s", d, w, s)
			}
		}
	}
	if s := section(t, page, "d1"); !strings.Contains(s, ">in 3m</td>") && !strings.Contains(s, ">in 4m</td>") {
		t.Errorf("d1's live version is not shown as created in 3 or 4 minutes:\n%s", s)
	}
	if s := section(t, page, "d3"); strings.Contains(s, "pinned") {
		t.Errorf("d3 is pinned:\n%s", s)
	}
	if s := section(t, page, "d3"); strings.Contains(s, "locked") {
		t.Errorf("d3 is locked:\n%s", s)
	}
	_, nodest, _ := strings.Cut(page, `<section id="without-destination">`)
	if !strings.Contains(nodest, "<h2>Failures without a destination</h2>") || !strings.Contains(nodest, `<td class="err">invalid_event</td>`) ||
		!strings.Contains(page, `<a class="pill err" href="#without-destination">1 failure(s) without a destination</a>`) {
		t.Errorf("the failure without a destination:\n%s", page)
	}

	_, body := httpGet(t, base+"/status.json")
	var st statusJSON
	decodeJSON(t, "/status.json", body, &st)
	sum := map[string]summaryJSON{}
	for _, d := range st.Destinations {
		sum[d.DestinationID] = d.Summary
	}
	if s := sum["d1"]; s.Results == nil || *s.Results != (resultCountsJSON{Published: 1, Superseded: 2, SupersededSincePublished: 2}) || s.Pinned == "" || s.Locked {
		t.Errorf("d1's summary: %+v %+v", s, s.Results)
	}
	// Additive: the older versions are published beside it, and the
	// version from the future stays live.
	if s := sum["d2"]; s.Results == nil || *s.Results != (resultCountsJSON{Published: 3}) || !strings.Contains(s.Pinned, "in the future") || !s.Locked {
		t.Errorf("d2's summary: %+v %+v", s, s.Results)
	}
	if s := sum["d3"]; s.Results == nil || *s.Results != (resultCountsJSON{Published: 1, Failed: 1}) || !s.LastFailureStale || s.Pinned != "" {
		t.Errorf("d3's summary: %+v %+v", s, s.Results)
	}
	if f := st.FailuresWithoutDestination; f == nil || f.Count != 1 || len(f.Recent) != 1 || f.Recent[0].Reason != "invalid_event" {
		t.Errorf("failures without a destination: %+v", f)
	}

	// status: the same line per destination, and the failures.
	code, out, stderr := e.cmd(t, "status", "--no-leftovers")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"  health: 1 published, last ",
		" · 0 failing · 2 superseded · pinned (live version src.one of p.one was created ",
		"  health: 1 published, last just now · 0 failing (1 failed in all) · 0 superseded\n",
		" · locked\n",
		"(older than the last publication)\n",
		"\nfailures without a destination: 1 in the events stream\n",
		"failed: invalid_event",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// ago says how long ago in the largest unit, "just now" within 5 s either
// way, and "in …" for a time ahead.
func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"}, {-4 * time.Second, "just now"}, {4 * time.Second, "just now"},
		{-42 * time.Second, "42s ago"}, {-3*time.Minute - 59*time.Second, "3m ago"}, {-5 * time.Hour, "5h ago"},
		{-47 * time.Hour, "47h ago"}, {-50 * time.Hour, "2d ago"}, {3*time.Minute + 30*time.Second, "in 3m"},
	} {
		if got := ago(now.Add(tc.d), now); got != tc.want {
			t.Errorf("ago(now%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// Leftovers younger than the leftover age are counted and said to be
// possibly in use, never reported as none.
func TestLeftoversText(t *testing.T) {
	t.Parallel()
	oldest := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		lo   service.LeftoverReport
		want string
	}{
		{service.LeftoverReport{}, "none"},
		{service.LeftoverReport{Recent: 3}, "none older than 1h; 3 younger than 1h, may be in use"},
		{service.LeftoverReport{Count: 1, Bytes: 10, Oldest: &oldest, Recent: 2},
			"1 of interrupted writes, 10 bytes, oldest from 2026-06-19T12:00:00Z: reconcile-state removes them; 2 younger than 1h, may be in use"},
	} {
		if got := leftoversText(tc.lo); got != tc.want {
			t.Errorf("leftoversText(%+v) = %q, want %q", tc.lo, got, tc.want)
		}
	}
}
