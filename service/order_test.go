package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// sourceOf is the source identity of the bundle in dir.
func sourceOf(t *testing.T, dir string) catalog.Source {
	t.Helper()
	h := newHarness(t)
	b, err := h.Service.OpenBundle(context.Background(), service.Request{Bundle: dir})
	if err != nil {
		t.Fatal(err)
	}
	return catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created}
}

// rootState is everything in a root, the catalog's exact bytes and its
// version included.
func rootState(t *testing.T, root storage.Backend) (map[string]string, string, storage.Version) {
	t.Helper()
	data, v, err := root.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	return contents(t, root), string(data), v
}

func TestOlderBundleAfterNewerChangesNothingUnlessAllowOlder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		older := map[string]string{"a.txt": "v1", "old.txt": "only in v1"}
		newer := map[string]string{"a.txt": "v2", "new.txt": "only in v2"}
		v1, _ := makeBundleAt(t, "weatherreporter.today", t0, older)
		v2, _ := makeBundleAt(t, "weatherreporter.today", t0.Add(time.Hour), newer)

		if _, err := h.Publish(t1, pipeA, "archive", v2); err != nil {
			t.Fatal(err)
		}
		files, cat, version := rootState(t, root)

		res, err := h.Publish(t2, pipeA, "archive", v1)
		var se *engine.SupersededError
		if !errors.Is(err, engine.ErrSuperseded) || !errors.As(err, &se) {
			t.Fatalf("older bundle after newer: err = %v, want ErrSuperseded", err)
		}
		if se.By != sourceOf(t, v2) || se.Source != sourceOf(t, v1) || se.Owner != (catalog.Owner{PipelineID: pipeA, DestinationID: "archive"}) {
			t.Fatalf("superseded error = %+v, want v1 beaten by v2", se)
		}
		if res.Plan.Superseded == nil || *res.Plan.Superseded != se.By || len(res.Written)+len(res.Updated)+len(res.Deleted) != 0 {
			t.Fatalf("superseded result acts: %+v", res)
		}
		gotFiles, gotCat, gotVersion := rootState(t, root)
		if !equalMaps(gotFiles, files) || gotCat != cat || gotVersion != version {
			t.Fatalf("superseded publication changed the root:\n%q\nwas\n%q", gotFiles, files)
		}
		wantContents(t, root, newer)

		// The newer one again is a redelivery: a no-op, not superseded.
		res, err = h.Publish(t2, pipeA, "archive", v2)
		if err != nil || res.Plan.Changed {
			t.Fatalf("redelivered newest: err %v, changed %v", err, res.Plan.Changed)
		}

		// An operator rolls back on purpose.
		res, err = h.Publish(t2, pipeA, "archive", v1, func(r *service.Request) { r.AllowOlder = true })
		if err != nil {
			t.Fatalf("allow older: %v", err)
		}
		wantStrings(t, "deleted", res.Deleted, []string{"new.txt"})
		wantContents(t, root, older)
		after := assertDescribesStorage(t, root)
		for _, o := range after.Outputs {
			if o.Source != sourceOf(t, v1) {
				t.Fatalf("%s records %+v after the roll back, want v1", o.Path, o.Source)
			}
		}
	})
}

// With equal created times the greater manifest digest wins, so the end
// state is the same whichever arrives first.
func TestEqualCreatedGreaterDigestWinsInEitherOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		x, _ := makeBundleAt(t, "weatherreporter.today", t0, map[string]string{"a.txt": "x"})
		y, _ := makeBundleAt(t, "weatherreporter.today", t0, map[string]string{"a.txt": "y"})
		hi, lo, hiContent := x, y, "x"
		if !planner.Newer(sourceOf(t, x), sourceOf(t, y)) {
			hi, lo, hiContent = y, x, "y"
		}
		for _, order := range [][]string{{hi, lo}, {lo, hi}} {
			h := newHarness(t)
			root, base := newRoot(t)
			h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
			for _, dir := range order {
				_, err := h.Publish(t1, pipeA, "archive", dir)
				if err != nil && !(dir == lo && errors.Is(err, engine.ErrSuperseded)) {
					t.Fatalf("publish: %v", err)
				}
				if dir == lo && order[0] == hi && !errors.Is(err, engine.ErrSuperseded) {
					t.Fatalf("smaller digest after greater: err = %v, want ErrSuperseded", err)
				}
			}
			wantContents(t, root, map[string]string{"a.txt": hiContent})
			if r := mustRecord(t, assertDescribesStorage(t, root), "a.txt"); r.Source != sourceOf(t, hi) {
				t.Fatalf("a.txt records %+v, want the greater digest", r.Source)
			}
		}
	})
}

// Additive: two sources of one owner writing one path end with the newer
// created there in either arrival order, each keeping its own other paths;
// a late replay of the older one changes nothing.
func TestAdditiveTwoSourcesOfOneOwnerEndAlikeInEitherOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		week, _ := makeBundleAt(t, "weatherreporter.week", t0, map[string]string{"shared.txt": "week", "week.txt": "w"})
		today, _ := makeBundleAt(t, "weatherreporter.today", t0.Add(time.Hour), map[string]string{"shared.txt": "today", "today.txt": "t"})
		for _, order := range [][]string{{week, today}, {today, week}} {
			h := newHarness(t)
			root, base := newRoot(t)
			h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
			for i, dir := range order {
				if _, err := h.Publish(t1.Add(time.Duration(i)*time.Minute), pipeA, "latest", dir); err != nil {
					t.Fatalf("publish: %v", err)
				}
			}
			wantContents(t, root, map[string]string{"shared.txt": "today", "today.txt": "t", "week.txt": "w"})
			cat := assertDescribesStorage(t, root)
			if r := mustRecord(t, cat, "shared.txt"); r.Source != sourceOf(t, today) {
				t.Fatalf("shared.txt records %+v, want the newer source's", r.Source)
			}
			res, err := h.Publish(t2, pipeA, "latest", week)
			if err != nil || res.Plan.Changed || res.KeptNewer != 1 {
				t.Fatalf("late replay of the older source: err %v, changed %v, kept_newer %d", err, res.Plan.Changed, res.KeptNewer)
			}
			wantContents(t, root, map[string]string{"shared.txt": "today", "today.txt": "t", "week.txt": "w"})
		}
	})
}
