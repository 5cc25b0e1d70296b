package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// retiredPaths reads the paths the root's retired record names.
func retiredPaths(t *testing.T, root storage.Backend) []string {
	t.Helper()
	data, _, err := root.ReadVersion(context.Background(), engine.RetiredPath)
	if err != nil {
		t.Fatal(err)
	}
	if data == nil {
		return nil
	}
	var doc struct {
		Retired []struct{ Path string }
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range doc.Retired {
		out = append(out, r.Path)
	}
	return out
}

// TestRetainPreviousKeepsDroppedPaths: with retain_previous, the paths a
// replacement drops leave the catalog but stay readable, recorded as
// retired, and verify reports nothing; a later publication that plans
// such a path writes it without a collision and the record lets it go;
// once due, a sweep removes them, but never content that changed since
// (someone else's now). Local and S3 alike.
func TestRetainPreviousKeepsDroppedPaths(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		root, _ := newRoot(t)
		ctx := context.Background()
		now := fixedNow
		e := &engine.Engine{Now: func() time.Time { return now }, Version: "test", Workers: 4}
		publishAt := func(v int, files map[string]string) engine.Result {
			t.Helper()
			pub := generated(files, v, fixedNow.Add(time.Duration(v)*time.Minute-time.Hour), planner.Replacement)
			pub.RetainPrevious = 10 * time.Second
			res, err := e.Publish(ctx, root, heldLease{}, pub)
			if err != nil {
				t.Fatalf("publication %d: %v", v, err)
			}
			return res
		}
		publishAt(1, map[string]string{"index.html": "1", "app.1.js": "js1", "keep.css": "c"})
		now = now.Add(time.Second)
		res := publishAt(2, map[string]string{"index.html": "2", "app.2.js": "js2", "keep.css": "c"})
		wantStrings(t, "deleted", res.Deleted, []string{"app.1.js"})
		if got := mustRead(t, root, "app.1.js"); got != "js1" {
			t.Fatalf("retired app.1.js holds %q", got)
		}
		cat, _ := readCatalog(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"app.2.js", "index.html", "keep.css"})
		wantStrings(t, "retired", retiredPaths(t, root), []string{"app.1.js"})
		rep, err := e.Verify(ctx, root, func(catalog.Output) bool { return true })
		if err != nil || len(rep.Missing)+len(rep.Damaged)+len(rep.InFlight) > 0 {
			t.Fatalf("verify with a retired path: %+v, %v", rep, err)
		}

		// Planned again before it is due: written, no collision, no longer retired.
		now = now.Add(time.Second)
		publishAt(3, map[string]string{"index.html": "3", "app.1.js": "js1 again", "keep.css": "c"})
		wantStrings(t, "retired", retiredPaths(t, root), []string{"app.2.js"})
		if got := mustRead(t, root, "app.1.js"); got != "js1 again" {
			t.Fatalf("app.1.js holds %q", got)
		}

		// Not due: the sweep keeps it; due: it goes, with the record.
		if swept, err := e.SweepRetired(ctx, root, heldLease{}); err != nil || len(swept) > 0 {
			t.Fatalf("sweep before due: %q, %v", swept, err)
		}
		now = now.Add(10 * time.Second)
		swept, err := e.SweepRetired(ctx, root, heldLease{})
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "swept", swept, []string{"app.2.js"})
		wantContents(t, root, map[string]string{"index.html": "3", "app.1.js": "js1 again", "keep.css": "c"})
		if got := retiredPaths(t, root); got != nil {
			t.Fatalf("record left after the sweep: %q", got)
		}

		// A publication that does not retain (retain_previous 0) plans a
		// retired path without a collision too.
		now = now.Add(time.Second)
		publishAt(4, map[string]string{"index.html": "4", "keep.css": "c"})
		pub := generated(map[string]string{"index.html": "5", "app.1.js": "js5", "keep.css": "c"}, 5, fixedNow.Add(5*time.Minute-time.Hour), planner.Replacement)
		if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
			t.Fatalf("publication over a retired path without retain_previous: %v", err)
		}

		// A retired path someone wrote over since is theirs: never removed.
		now = now.Add(time.Second)
		publishAt(6, map[string]string{"index.html": "6", "keep.css": "c"})
		mustPut(t, root, "app.1.js", "mine now")
		now = now.Add(time.Minute)
		if swept, err := e.SweepRetired(ctx, root, heldLease{}); err != nil || len(swept) > 0 {
			t.Fatalf("sweep over changed content: %q, %v", swept, err)
		}
		if got := mustRead(t, root, "app.1.js"); got != "mine now" || slices.Contains(retiredPaths(t, root), "app.1.js") {
			t.Fatalf("app.1.js holds %q, retired %q", got, retiredPaths(t, root))
		}
	})
}

// TestRetiredPathsGoBySweepAndPrune: serve's sweep (service.SweepRetired)
// removes retired paths once due and not before, and so does prune;
// max_deletes counts a retired path when its publication plans it, not
// again when it is swept.
func TestRetiredPathsGoBySweepAndPrune(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		ctx := context.Background()
		root, d := newRoot(t)
		d = named(d, "www", planner.Replacement)
		d.RetainPrevious, d.MaxDeletes = config.Duration(10*time.Second), 1
		d = h.AddDest(d, root, pipeA)
		at := t1
		publishAt := func(files map[string]string) {
			t.Helper()
			at = at.Add(time.Second)
			h.MustPublish(at, pipeA, "www", "site", files)
		}
		publishAt(map[string]string{"a": "1", "o1": "1", "o2": "2"})
		publishAt(map[string]string{"a": "2", "o1": "1"})
		publishAt(map[string]string{"a": "3"})
		wantStrings(t, "retired", retiredPaths(t, root), []string{"o1", "o2"})

		h.Clock.Set(at.Add(5 * time.Second))
		if swept, err := h.Service.SweepRetired(ctx, d); err != nil || len(swept) > 0 {
			t.Fatalf("sweep before due: %q, %v", swept, err)
		}
		h.Clock.Set(at.Add(11 * time.Second))
		swept, err := h.Service.SweepRetired(ctx, d)
		if err != nil {
			t.Fatalf("sweep of 2 retired paths under max_deletes 1: %v", err)
		}
		wantStrings(t, "swept", swept, []string{"o1", "o2"})
		wantContents(t, root, map[string]string{"a": "3"})

		// Planned deletes over max_deletes are refused, retained or not.
		at = at.Add(time.Minute)
		publishAt(map[string]string{"a": "4", "p": "p", "q": "q"})
		dir, _ := makeBundleAt(t, "site", at, map[string]string{"a": "5"})
		if _, err := h.Publish(at.Add(time.Second), pipeA, "www", dir); !errors.Is(err, planner.ErrTooManyDeletes) {
			t.Fatalf("publication dropping 2 under max_deletes 1: %v", err)
		}

		// prune removes the due ones too.
		publishAt(map[string]string{"a": "6", "p": "p"})
		h.Clock.Set(at.Add(time.Minute))
		res, err := h.Service.Prune(ctx, d, catalog.Owner{PipelineID: pipeA, DestinationID: "www"}, service.PruneOptions{Cutoff: t0})
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "pruned retired", res.Swept, []string{"q"})
		wantContents(t, root, map[string]string{"a": "6", "p": "p"})
	})
}

// TestRetiredPathInTheWayIsDisplaced: a retired file where a later
// version needs a folder, or retired files below a path where it needs a
// file, are deleted before the writes like a managed output in the way:
// no collision. Local and S3 alike.
func TestRetiredPathInTheWayIsDisplaced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		root, _ := newRoot(t)
		ctx := context.Background()
		now := fixedNow
		e := &engine.Engine{Now: func() time.Time { return now }, Version: "test"}
		for v, files := range []map[string]string{
			{"index.html": "0", "docs": "a file", "api/v1.html": "v1"},
			{"index.html": "1"},
			{"index.html": "2", "docs/index.html": "a folder now", "api": "a file now"},
		} {
			now = now.Add(time.Second)
			pub := generated(files, v, fixedNow.Add(time.Duration(v)*time.Minute-time.Hour), planner.Replacement)
			pub.RetainPrevious = time.Hour
			if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
		}
		wantContents(t, root, map[string]string{"index.html": "2", "docs/index.html": "a folder now", "api": "a file now"})
		if _, err := e.SweepRetired(ctx, root, heldLease{}); err != nil {
			t.Fatal(err)
		}
		if got := retiredPaths(t, root); got != nil {
			t.Fatalf("retired paths displaced since are still recorded: %q", got)
		}
	})
}

// TestSweepOfAStreamedCatalog: the sweep of a root whose catalog is read
// as a stream (a large root's way) reads only the records at the retired
// paths, and with them removes a due retired path that no record names,
// as a sweep that reads the catalog whole does.
func TestSweepOfAStreamedCatalog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		root, _ := newRoot(t)
		ctx := context.Background()
		now := fixedNow
		e := &engine.Engine{Now: func() time.Time { return now }, Version: "test", Workers: 4, WholeCatalog: -1}
		for v, files := range []map[string]string{{"index.html": "1", "app.1.js": "js1"}, {"index.html": "2", "app.2.js": "js2"}} {
			pub := generated(files, v+1, fixedNow.Add(time.Duration(v+1)*time.Minute-time.Hour), planner.Replacement)
			pub.RetainPrevious = 10 * time.Second
			if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
				t.Fatalf("publication %d: %v", v+1, err)
			}
			now = now.Add(time.Second)
		}
		wantStrings(t, "retired", retiredPaths(t, root), []string{"app.1.js"})
		now = now.Add(10 * time.Second)
		swept, err := e.SweepRetired(ctx, root, heldLease{})
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "swept", swept, []string{"app.1.js"})
		wantContents(t, root, map[string]string{"index.html": "2", "app.2.js": "js2"})
		if got := retiredPaths(t, root); got != nil {
			t.Fatalf("record left after the sweep: %q", got)
		}
	})
}
