package consumer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
)

// burstYAML: pipeline burst publishes into root live by replacement;
// pipeline first, another owner in the same root, holds the root while a
// burst is delivered.
const burstYAML = `
pipelines:
  - {id: first, destinations: [live]}
  - {id: burst, destinations: [live]}
destinations:
  - {id: live, backend: local, path: "@live@", workflow: replacement}
`

// holdRootUntil makes the first publication into destination dest's root
// wait, after it took the root's turn, until cond holds (or 20 s pass).
func holdRootUntil(dest string, cond func() bool) func(config.Destination, storage.Backend) storage.Backend {
	var started atomic.Bool
	return func(d config.Destination, b storage.Backend) storage.Backend {
		if d.ID != dest {
			return b
		}
		return &hooked{Backend: b, read: func(ctx context.Context, _ string) error {
			if !started.CompareAndSwap(false, true) {
				return nil
			}
			for deadline := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(deadline); {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil
		}}
	}
}

// eventIDs are n new bundle event ids.
func eventIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = events.NewEventID()
	}
	return ids
}

// countType counts the results of type typ among ids'.
func (e *env) countType(ids []string, typ string) int {
	n := 0
	for _, id := range ids {
		for _, r := range e.results.of(id) {
			if r.Type == typ {
				n++
			}
		}
	}
	return n
}

// ownerSource is the source version of owner's records in the root.
func ownerSource(t *testing.T, root storage.Backend, owner catalog.Owner) catalog.Source {
	t.Helper()
	var src catalog.Source
	for _, o := range readCatalog(t, root).Outputs {
		if o.PipelineID == owner.PipelineID && o.DestinationID == owner.DestinationID {
			if src.ID != "" && src != o.Source {
				t.Fatalf("%s holds two versions: %+v and %+v", owner, src, o.Source)
			}
			src = o.Source
		}
	}
	return src
}

// TestABurstPublishesOnlyTheNewest: v1…v8 of one source are announced
// for a replacement root while another owner's publication holds it. v8
// is published; v1…v7 are superseded at once, while the root is still
// held, each naming a newer version, and their bundles' files are never read (they
// are gone after their manifests were written: a read would fail with
// bundle_missing).
func TestABurstPublishesOnlyTheNewest(t *testing.T) {
	e := newEnv(t, burstYAML, false)
	burst := eventIDs(8) // before the node reads them
	opts := fastOptions()
	opts.Workers = 12
	e.start(nodeConfig{opts: opts, wrap: holdRootUntil("live", func() bool { return e.countType(burst, events.TypeSuperseded) >= 7 })})

	firstLoc, firstDigest := e.bundle("src.first", map[string]string{"first.md": "# first\n"})
	first := e.announce(events.BundleReady{PipelineID: "first", Bundle: firstLoc, ManifestDigest: firstDigest})
	var newest string
	for v := 1; v <= 8; v++ {
		loc, digest := e.bundle("src.burst", map[string]string{"report.md": fmt.Sprintf("# v%d\n", v)})
		if v < 8 {
			if err := os.Remove(filepath.Join(loc, "report.md")); err != nil {
				t.Fatal(err)
			}
		}
		e.announce(events.BundleReady{ID: burst[v-1], PipelineID: "burst", Bundle: loc, ManifestDigest: digest})
		newest = digest
	}
	e.quiet(30 * time.Second)

	if r := e.results.of(first); len(r) != 1 || r[0].Type != events.TypePublished {
		t.Fatalf("the other owner's event: %+v, want one published", r)
	}
	for v, id := range burst {
		rs := e.results.of(id)
		if len(rs) != 1 {
			t.Fatalf("v%d: %d results %+v, want one", v+1, len(rs), rs)
		}
		r := rs[0]
		if v == 7 {
			if r.Type != events.TypePublished || r.Written != 1 {
				t.Fatalf("v8: %s %s written %d (%s), want published, 1 written", r.Type, r.Reason, r.Written, r.Message)
			}
			continue
		}
		// By the newest version waiting when it was passed over.
		if r.Type != events.TypeSuperseded || r.SupersededBy == nil || r.Source == nil || r.Source.ID != "src.burst" ||
			r.SupersededBy.ID != "src.burst" || !r.SupersededBy.Created.After(r.Source.Created) {
			t.Fatalf("v%d: %s %s %+v by %+v (%s), want superseded by a newer version", v+1, r.Type, r.Reason, r.Source, r.SupersededBy, r.Message)
		}
	}
	root := localRoot(t, e.roots["live"])
	if got := ownerSource(t, root, catalog.Owner{PipelineID: "burst", DestinationID: "live"}); got.Digest != newest {
		t.Fatalf("the root holds %+v, want v8 (%s)", got, newest)
	}
	e.checkNoBadEvents()
}

// TestABurstOfTwoSourcesEndsAsInOrder: versions of two sources of one
// owner, announced out of order while another owner's publication holds
// the root, leave the root as publishing them one by one in announce
// order does (on a twin root, each awaited): a version passes only to a
// newer one of its own source, never across a version of the other
// source (which replaces the owner's outputs and lets an older one
// publish again).
func TestABurstOfTwoSourcesEndsAsInOrder(t *testing.T) {
	e := newEnv(t, `
pipelines:
  - {id: first, destinations: [live]}
  - {id: burst, destinations: [live]}
  - {id: inorder, destinations: [twin]}
destinations:
  - {id: live, backend: local, path: "@live@", workflow: replacement}
  - {id: twin, backend: local, path: "@twin@", workflow: replacement}
`, false)
	type version struct{ loc, digest string }
	made := map[string]version{}
	for _, name := range []string{"a1", "b1", "a2", "b2", "a3", "a4"} { // created in this order
		loc, digest := e.bundle("src."+name[:1], map[string]string{name[:1] + ".md": "# " + name + "\n"})
		made[name] = version{loc, digest}
	}
	named := map[string]string{} // by digest
	for name, v := range made {
		named[v.digest] = name
	}
	newerOf := func(name, by string) bool { return by != "" && by[0] == name[0] && by[1] > name[1] }
	order := []string{"a1", "b2", "a3", "a2", "a4", "b1"}
	var burst []string
	for _, name := range order { // before the node reads them
		burst = append(burst, "burst-"+name)
	}
	opts := fastOptions()
	opts.Workers = 12
	e.start(nodeConfig{opts: opts, wrap: holdRootUntil("live", func() bool { return e.countType(burst, events.TypeSuperseded) >= 3 })})
	for _, name := range order {
		e.announce(events.BundleReady{PipelineID: "inorder", Bundle: made[name].loc, ManifestDigest: made[name].digest, ID: "inorder-" + name})
		e.wait("inorder-"+name, 1, 20*time.Second)
	}
	firstLoc, firstDigest := e.bundle("src.first", map[string]string{"first.md": "# first\n"})
	e.announce(events.BundleReady{PipelineID: "first", Bundle: firstLoc, ManifestDigest: firstDigest})
	for _, name := range order {
		e.announce(events.BundleReady{PipelineID: "burst", Bundle: made[name].loc, ManifestDigest: made[name].digest, ID: "burst-" + name})
	}
	e.quiet(30 * time.Second)

	// a1, a3 and a2 pass to a newer a; b1 runs: a4, between it and b2,
	// replaces the owner's outputs, and in order b1 publishes after it.
	want := map[string]string{"a1": "a4", "b2": "", "a3": "a4", "a2": "a4", "a4": "", "b1": ""}
	for _, name := range order {
		rs := e.results.of("burst-" + name)
		if len(rs) != 1 {
			t.Fatalf("%s: %d results %+v, want one", name, len(rs), rs)
		}
		r := rs[0]
		switch by := want[name]; {
		case by == "" && r.Type != events.TypePublished:
			t.Errorf("%s: %s %s (%s), want published", name, r.Type, r.Reason, r.Message)
		case by != "" && (r.Type != events.TypeSuperseded || r.SupersededBy == nil || !newerOf(name, named[r.SupersededBy.Digest])):
			t.Errorf("%s: %s by %+v (%s), want superseded by a newer version of its source (%s when known)", name, r.Type, r.SupersededBy, r.Message, by)
		}
	}
	live, twin := localRoot(t, e.roots["live"]), localRoot(t, e.roots["twin"])
	got := ownerSource(t, live, catalog.Owner{PipelineID: "burst", DestinationID: "live"})
	inOrder := ownerSource(t, twin, catalog.Owner{PipelineID: "inorder", DestinationID: "twin"})
	if got != inOrder || got.Digest != made["b1"].digest {
		t.Fatalf("the burst left %+v, in order %+v (b1 is %s)", got, inOrder, made["b1"].digest)
	}
	liveFiles, twinFiles := files(t, live), files(t, twin)
	for _, p := range []string{"a.md", "b.md"} {
		if liveFiles[p] != twinFiles[p] {
			t.Errorf("%s: %q after the burst, %q in order", p, liveFiles[p], twinFiles[p])
		}
	}
	e.checkNoBadEvents()
}

// TestABurstSharedByTwoProcesses: two serve processes share a burst of
// v1…v12 of one source to one replacement root; in each, the first
// publication holds the root until the others it holds are passed over.
// Every event gets exactly one result, published or superseded by a
// newer version; each process publishes at most its first and its newest
// version (the rest it passed over: at least 8), newest wins between the
// processes, and the root ends holding v12.
func TestABurstSharedByTwoProcesses(t *testing.T) {
	e := newEnv(t, burstYAML, false)
	const n = 12
	burst := eventIDs(n) // before the nodes read them
	passed := func() int {
		k := 0
		for _, id := range burst {
			for _, r := range e.results.of(id) {
				if r.Type == events.TypeSuperseded && strings.Contains(r.Message, "waits in this process's line") {
					k++
				}
			}
		}
		return k
	}
	opts := fastOptions()
	opts.Workers = 8
	for _, name := range []string{"one", "two"} {
		e.start(nodeConfig{name: name, opts: opts, wrap: holdRootUntil("live", func() bool { return passed() >= n-4 })})
	}
	var newest string
	for v := 1; v <= n; v++ {
		loc, digest := e.bundle("src.burst", map[string]string{"report.md": fmt.Sprintf("# v%d\n", v)})
		e.announce(events.BundleReady{ID: burst[v-1], PipelineID: "burst", Bundle: loc, ManifestDigest: digest})
		newest = digest
	}
	e.quiet(30 * time.Second)
	for v, id := range burst {
		rs := e.results.of(id)
		if len(rs) != 1 {
			t.Fatalf("v%d: %d results %+v, want one", v+1, len(rs), rs)
		}
		r := rs[0]
		ok := r.Type == events.TypePublished ||
			r.Type == events.TypeSuperseded && r.SupersededBy != nil && r.SupersededBy.Created.After(r.Source.Created)
		if !ok {
			t.Fatalf("v%d: %s %s (%s)", v+1, r.Type, r.Reason, r.Message)
		}
	}
	if k := passed(); k < n-4 {
		t.Fatalf("%d of %d versions passed over, want at least %d", k, n, n-4)
	}
	if got := ownerSource(t, localRoot(t, e.roots["live"]), catalog.Owner{PipelineID: "burst", DestinationID: "live"}); got.Digest != newest {
		t.Fatalf("the root holds %+v, want v%d (%s)", got, n, newest)
	}
	e.checkNoBadEvents()
}

// TestABurstWiderThanTheWorkersIsPassedOverAtOnce: with the default
// workers (32), another owner's publication holds each of 20 roots while
// 4 versions of one source per root are announced: 100 events, more than
// the workers. The waiting versions hold no worker, so all of them are in
// the process at once: in each root v1…v3 are superseded by a newer
// version waiting in the line while the root is still held (their files
// are gone: a read would fail with bundle_missing), and only v4 is
// published.
func TestABurstWiderThanTheWorkersIsPassedOverAtOnce(t *testing.T) {
	const roots, versions = 20, 4
	var yaml strings.Builder
	yaml.WriteString("pipelines:\n")
	for r := range roots {
		fmt.Fprintf(&yaml, "  - {id: first%d, destinations: [d%d]}\n  - {id: burst%d, destinations: [d%d]}\n", r, r, r, r)
	}
	yaml.WriteString("destinations:\n")
	for r := range roots {
		fmt.Fprintf(&yaml, "  - {id: d%d, backend: local, path: \"@r%d@\", workflow: replacement}\n", r, r)
	}
	e := newEnv(t, yaml.String(), false)
	burst := make([][]string, roots) // before the node reads them
	for r := range burst {
		burst[r] = eventIDs(versions)
	}
	var timedOut atomic.Int32
	hold := holdEachRootUntil(10*time.Second, &timedOut, func(dest string) bool {
		var r int
		_, _ = fmt.Sscanf(dest, "d%d", &r)
		return e.countType(burst[r], events.TypeSuperseded) >= versions-1
	})
	opts := fastOptions()
	opts.Workers = 0 // the default
	e.start(nodeConfig{opts: opts, wrap: hold})

	firsts := make([]string, roots)
	for r := range roots {
		loc, digest := e.bundle(fmt.Sprintf("src.first%d", r), map[string]string{"first.md": "# first\n"})
		firsts[r] = e.announce(events.BundleReady{PipelineID: fmt.Sprintf("first%d", r), Bundle: loc, ManifestDigest: digest})
	}
	newest := make([]string, roots)
	for v := range versions {
		for r := range roots {
			loc, digest := e.bundle(fmt.Sprintf("src.burst%d", r), map[string]string{"report.md": fmt.Sprintf("# v%d\n", v+1)})
			if v < versions-1 {
				if err := os.Remove(filepath.Join(loc, "report.md")); err != nil {
					t.Fatal(err)
				}
			}
			e.announce(events.BundleReady{ID: burst[r][v], PipelineID: fmt.Sprintf("burst%d", r), Bundle: loc, ManifestDigest: digest})
			newest[r] = digest
		}
	}
	e.quiet(60 * time.Second)

	if n := timedOut.Load(); n > 0 {
		t.Errorf("%d of %d roots were held until the hold's deadline: their burst was not passed over while they were held", n, roots)
	}
	for r := range roots {
		if rs := e.results.of(firsts[r]); len(rs) != 1 || rs[0].Type != events.TypePublished {
			t.Fatalf("d%d: the other owner's event: %+v, want one published", r, rs)
		}
		for v, id := range burst[r] {
			rs := e.results.of(id)
			if len(rs) != 1 {
				t.Fatalf("d%d v%d: %d results %+v, want one", r, v+1, len(rs), rs)
			}
			switch res := rs[0]; {
			case v == versions-1 && (res.Type != events.TypePublished || res.Written != 1):
				t.Errorf("d%d v%d: %s %s written %d (%s), want published, 1 written", r, v+1, res.Type, res.Reason, res.Written, res.Message)
			case v < versions-1 && (res.Type != events.TypeSuperseded || !strings.Contains(res.Message, "waits in this process's line")):
				t.Errorf("d%d v%d: %s %s (%s), want superseded by a newer version waiting in the line", r, v+1, res.Type, res.Reason, res.Message)
			}
		}
		owner := catalog.Owner{PipelineID: fmt.Sprintf("burst%d", r), DestinationID: fmt.Sprintf("d%d", r)}
		if got := ownerSource(t, localRoot(t, e.roots[fmt.Sprintf("r%d", r)]), owner); got.Digest != newest[r] {
			t.Errorf("d%d holds %+v, want v%d (%s)", r, got, versions, newest[r])
		}
	}
	e.checkNoBadEvents()
}

// holdEachRootUntil makes the first publication into each destination's
// root wait, after it took the root's turn, until cond(destination id)
// holds or wait passes (counted in timedOut).
func holdEachRootUntil(wait time.Duration, timedOut *atomic.Int32, cond func(dest string) bool) func(config.Destination, storage.Backend) storage.Backend {
	var started sync.Map
	return func(d config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, read: func(ctx context.Context, _ string) error {
			if _, again := started.LoadOrStore(d.ID, true); again {
				return nil
			}
			for deadline := time.Now().Add(wait); !cond(d.ID); {
				if !time.Now().Before(deadline) {
					timedOut.Add(1)
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil
		}}
	}
}

// TestWaitingEventsHoldNoWorkerWhilePublicationsStayBounded: with two
// workers, once another owner's publications hold roots d0 and d1, 4
// versions of one source per root and then an event for a third root d2
// are announced. The versions wait in their roots' lines without a
// worker, and all but the newest are passed over while the roots are
// held; d2's publication waits for a worker until a hold ends: no more
// than two publications run at once.
func TestWaitingEventsHoldNoWorkerWhilePublicationsStayBounded(t *testing.T) {
	const versions = 4
	e := newEnv(t, `
pipelines:
  - {id: first0, destinations: [d0]}
  - {id: first1, destinations: [d1]}
  - {id: burst0, destinations: [d0]}
  - {id: burst1, destinations: [d1]}
  - {id: third, destinations: [d2]}
destinations:
  - {id: d0, backend: local, path: "@r0@", workflow: replacement}
  - {id: d1, backend: local, path: "@r1@", workflow: replacement}
  - {id: d2, backend: local, path: "@r2@", workflow: replacement}
`, false)
	burst := [][]string{eventIDs(versions), eventIDs(versions)} // before the node reads them
	var timedOut, thirdWhileHeld, held atomic.Int32
	passed := func() bool {
		return e.countType(burst[0], events.TypeSuperseded) >= versions-1 && e.countType(burst[1], events.TypeSuperseded) >= versions-1
	}
	var holding sync.Map
	hold := holdEachRootUntil(10*time.Second, &timedOut, func(dest string) bool {
		if dest != "d2" {
			if _, again := holding.LoadOrStore(dest, true); !again {
				held.Add(1)
			}
			return passed()
		}
		if !passed() { // d0 and d1 are still held
			thirdWhileHeld.Add(1)
		}
		return true
	})
	opts := fastOptions()
	opts.Workers = 2
	e.start(nodeConfig{opts: opts, wrap: hold})
	for r := range 2 {
		loc, digest := e.bundle(fmt.Sprintf("src.first%d", r), map[string]string{"first.md": "# first\n"})
		e.announce(events.BundleReady{PipelineID: fmt.Sprintf("first%d", r), Bundle: loc, ManifestDigest: digest})
	}
	e.waitFor(10*time.Second, func() bool { return held.Load() == 2 }, "both roots held")
	for v := range versions {
		for r := range 2 {
			loc, digest := e.bundle(fmt.Sprintf("src.burst%d", r), map[string]string{"report.md": fmt.Sprintf("# v%d\n", v+1)})
			e.announce(events.BundleReady{ID: burst[r][v], PipelineID: fmt.Sprintf("burst%d", r), Bundle: loc, ManifestDigest: digest})
		}
	}
	loc, digest := e.bundle("src.third", map[string]string{"third.md": "# third\n"})
	third := e.announce(events.BundleReady{PipelineID: "third", Bundle: loc, ManifestDigest: digest})
	e.quiet(60 * time.Second)

	if n := timedOut.Load(); n > 0 {
		t.Errorf("%d roots were held until the hold's deadline: their burst was not passed over while they were held", n)
	}
	if thirdWhileHeld.Load() > 0 {
		t.Errorf("d2's publication ran while d0 and d1 were held: more publications than workers ran at once")
	}
	for r := range 2 {
		if n := e.countType(burst[r], events.TypeSuperseded); n != versions-1 {
			t.Errorf("d%d: %d versions superseded, want %d", r, n, versions-1)
		}
	}
	if rs := e.results.of(third); len(rs) != 1 || rs[0].Type != events.TypePublished {
		t.Fatalf("d2: %+v, want one published", rs)
	}
	e.checkNoBadEvents()
}
