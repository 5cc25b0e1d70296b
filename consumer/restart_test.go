package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// TestExactlyOnceAcrossNATSCrashes: NATS is killed (SIGKILL: no shutdown,
// no flush) while two serve processes work through a burst of 200 events
// (20 replacement roots × 10 versions of one source), and started again on
// the same store. The durable may come back without the deliveries it had
// (a redelivery then counts 1 again), results may not reach the stream
// during the outage: still every event gets exactly one result, every
// root holds the newest version, and verify finds nothing wrong.
func TestExactlyOnceAcrossNATSCrashes(t *testing.T) {
	t.Parallel()
	rounds := 10
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		t.Run(fmt.Sprintf("round-%d", round+1), func(t *testing.T) { crashRound(t, round) })
	}
}

const (
	crashRoots    = 20
	crashVersions = 10
)

func crashRound(t *testing.T, round int) {
	var yaml strings.Builder
	yaml.WriteString("pipelines:\n  - id: burst\n    destinations: [")
	for r := range crashRoots {
		if r > 0 {
			yaml.WriteString(", ")
		}
		fmt.Fprintf(&yaml, "d%d", r)
	}
	yaml.WriteString("]\ndestinations:\n")
	for r := range crashRoots {
		fmt.Fprintf(&yaml, "  - id: d%d\n    backend: local\n    path: @root%d@\n    workflow: replacement\n", r, r)
	}
	proc := testenv.NewNATSProcess(t)
	e := newEnvWith(t, proc, events.SetupConfig{}, yaml.String(), false)
	opts := fastOptions()
	opts.Workers = 8
	opts.MaxDeliver = 50
	for i := range 2 {
		e.start(nodeConfig{name: fmt.Sprintf("serve-%d", i), opts: opts})
	}
	// Bundles first, oldest version first: v<n> of every root is newer
	// than v<n-1>.
	type announced struct {
		id, root, digest string
		version          int
	}
	var all []announced
	newest := map[string]map[string]string{} // root -> newest version's files
	for v := 1; v <= crashVersions; v++ {
		for r := range crashRoots {
			files := map[string]string{
				"report.md":               fmt.Sprintf("# root %d\n\nversion %d\n", r, v),
				fmt.Sprintf("v%d.txt", v): "only in this version\n",
				"data/common.csv":         "a,b\n1,2\n",
			}
			loc, digest := e.bundle("burst.report", files)
			all = append(all, announced{root: fmt.Sprintf("d%d", r), digest: digest, version: v, id: loc})
			newest[fmt.Sprintf("d%d", r)] = files
		}
	}
	crashAfter := time.Duration(50+rand.IntN(400)) * time.Millisecond
	start := time.Now()
	for i, a := range all {
		all[i].id = e.announce(events.BundleReady{PipelineID: "burst", Bundle: a.id, ManifestDigest: a.digest, Destinations: []string{a.root}})
	}
	time.Sleep(time.Until(start.Add(crashAfter)))
	proc.Kill()
	time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
	proc.Start()

	// Every event reported; then long enough for a second result of any
	// of them to show (a redelivery waits out the ack wait).
	var results []events.Result
	e.waitFor(2*time.Minute, func() bool {
		results = readResults(t, e)
		return len(results) >= len(all)
	}, "a result for each of %d events (round %d, NATS killed %s into the burst)", len(all), round+1, crashAfter)
	e.settled(time.Minute)
	time.Sleep(2 * opts.AckWait)
	results = readResults(t, e)

	byEvent := map[string][]events.Result{}
	for _, r := range results {
		byEvent[r.BundleEventID] = append(byEvent[r.BundleEventID], r)
	}
	wrong := 0
	for _, a := range all {
		rs := byEvent[a.id]
		if len(rs) != 1 {
			if wrong++; wrong <= 5 { // the first few say what happened
				var types []string
				for _, r := range rs {
					types = append(types, fmt.Sprintf("%s (attempt %d, written %d)", r.Type, r.Attempts, r.Written))
				}
				t.Errorf("%s v%d (%s): %d results %v, want 1", a.root, a.version, a.id, len(rs), types)
			}
			continue
		}
		r := rs[0]
		if r.Type != events.TypePublished && r.Type != events.TypeSuperseded {
			t.Errorf("%s v%d: %s %s: %s", a.root, a.version, r.Type, r.Reason, r.Message)
		}
		if a.version == crashVersions && r.Type != events.TypePublished {
			t.Errorf("%s: the newest version was %s", a.root, r.Type)
		}
	}
	if len(results) != len(all) || wrong > 0 {
		t.Errorf("%d results for %d events; %d events without exactly one", len(results), len(all), wrong)
	}
	eng := &engine.Engine{}
	for r := range crashRoots {
		id := fmt.Sprintf("d%d", r)
		root := localRoot(t, e.roots[fmt.Sprintf("root%d", r)])
		got := files(t, root)
		for p, content := range newest[id] {
			if got[p] != digestOf(content) {
				t.Errorf("%s: %s is %s, want the newest version's", id, p, got[p])
			}
		}
		kept := 0
		for p := range got {
			if !strings.HasPrefix(p, ".distributor/reports/") {
				continue
			}
			// A result whose publish timed out while NATS was away is kept
			// for the next attempt; the server may still have stored it
			// (the client sends it on reconnect) and the other process
			// reported the event meanwhile. Such a copy is left to expire;
			// any other report left behind is a defect.
			kept++
			var rep struct {
				Event  string          `json:"bundle_event_id"`
				Result json.RawMessage `json:"result"`
			}
			data, err := os.ReadFile(filepath.Join(e.roots[fmt.Sprintf("root%d", r)], filepath.FromSlash(p)))
			if err != nil || json.Unmarshal(data, &rep) != nil || rep.Result == nil || len(byEvent[rep.Event]) != 1 {
				t.Errorf("%s: a report left behind: %s", id, data)
			}
		}
		if len(got) != len(newest[id])+1+kept { // and the catalog
			t.Errorf("%s holds %d files %v, want the newest version's %d and the catalog", id, len(got), got, len(newest[id]))
		}
		rep, err := eng.Verify(context.Background(), root, func(catalog.Output) bool { return true })
		if err != nil || !rep.OK() || rep.PendingRecovery {
			t.Errorf("%s: verify: %v %+v", id, err, rep)
		}
	}
}
