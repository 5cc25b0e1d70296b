package engine_test

// Every catalog and workflow rule (docs/catalog.md)
// end to end through Runner.Publish, on a local root and on an S3 root.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

func itemPaths(items []planner.Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Path)
	}
	return out
}

func TestReplacementDeletesOwnersUnplannedOutputsKeepsOtherOwners(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.AddDest(named(base, "tides", planner.Replacement), root, pipeB)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.tomorrow", map[string]string{"a/1.txt": "one", "a/2.txt": "two"})
		h.MustPublish(t1, pipeB, "tides", "tides.now", map[string]string{"t/1.txt": "tide"})
		before, _ := readCatalog(t, root)

		res := h.MustPublish(t2, pipeA, "archive", "weatherreporter.tomorrow", map[string]string{"a/1.txt": "one"})
		wantStrings(t, "deleted", res.Deleted, []string{"a/2.txt"})
		wantStrings(t, "written", itemPaths(res.Written), nil)
		// Same bytes, new source digest: the record changes, the bytes do not.
		wantStrings(t, "updated", itemPaths(res.Updated), []string{"a/1.txt"})
		wantContents(t, root, map[string]string{"a/1.txt": "one", "t/1.txt": "tide"})
		after := assertDescribesStorage(t, root)
		wantStrings(t, "records", recordPaths(after), []string{"a/1.txt", "t/1.txt"})
		if got, want := mustRecord(t, after, "t/1.txt"), mustRecord(t, before, "t/1.txt"); !reflect.DeepEqual(got, want) {
			t.Fatalf("the other owner's record changed:\n%+v\nwant %+v", got, want)
		}
		a := mustRecord(t, after, "a/1.txt")
		if a.PipelineID != pipeA || a.DestinationID != "archive" || !a.CreatedAt.Equal(t1) || !a.UpdatedAt.Equal(t2) {
			t.Fatalf("a/1.txt record = %+v, want owner %s/archive created %s updated %s", a, pipeA, t1, t2)
		}
	})
}

func TestAdditiveRetainsUnplannedOutputs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a1", "b.txt": "b1"})
		before, _ := readCatalog(t, root)

		res := h.MustPublish(t2, pipeA, "latest", "weatherreporter.tomorrow", map[string]string{"a.txt": "a2", "c.txt": "c2"})
		wantStrings(t, "written", itemPaths(res.Written), []string{"a.txt", "c.txt"})
		wantStrings(t, "deleted", res.Deleted, nil)
		wantContents(t, root, map[string]string{"a.txt": "a2", "b.txt": "b1", "c.txt": "c2"})
		after := assertDescribesStorage(t, root)
		if got, want := mustRecord(t, after, "b.txt"), mustRecord(t, before, "b.txt"); !reflect.DeepEqual(got, want) {
			t.Fatalf("retained record changed:\n%+v\nwant %+v", got, want)
		}
		a := mustRecord(t, after, "a.txt")
		if a.Source.ID != "weatherreporter.tomorrow" || !a.CreatedAt.Equal(t1) || !a.UpdatedAt.Equal(t2) {
			t.Fatalf("a.txt record = %+v, want source weatherreporter.tomorrow, created %s, updated %s", a, t1, t2)
		}
	})
}

// Newest wins per path in additive: an older bundle of a source writes the
// paths no newer version wrote and leaves the newer version's paths, bytes
// and records, exactly as they were. It is published, never superseded;
// a redelivery changes nothing and --allow-older rolls back: it overwrites
// and keeps the paths only newer versions wrote, which DeleteLater deletes.
func TestAdditiveOlderBundleKeepsNewerVersionsPaths(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		v1, _ := makeBundleAt(t, "weatherreporter.today", t0, map[string]string{"common.txt": "v1", "day-1.txt": "one"})
		v2, _ := makeBundleAt(t, "weatherreporter.today", t0.Add(time.Hour), map[string]string{"common.txt": "v2", "day-2.txt": "two"})
		if _, err := h.Publish(t1, pipeA, "latest", v2); err != nil {
			t.Fatal(err)
		}
		before, _ := readCatalog(t, root)

		res, err := h.Publish(t2, pipeA, "latest", v1)
		if err != nil {
			t.Fatalf("older additive bundle: %v", err)
		}
		if res.Plan.Superseded != nil || res.KeptNewer != 1 || res.Unchanged != 0 {
			t.Fatalf("superseded %v, kept_newer %d, unchanged %d; want not superseded, 1 kept", res.Plan.Superseded, res.KeptNewer, res.Unchanged)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"day-1.txt"})
		wantStrings(t, "updated", itemPaths(res.Updated), nil)
		wantStrings(t, "deleted", res.Deleted, nil)
		wantContents(t, root, map[string]string{"common.txt": "v2", "day-1.txt": "one", "day-2.txt": "two"})
		after := assertDescribesStorage(t, root)
		if got, want := mustRecord(t, after, "common.txt"), mustRecord(t, before, "common.txt"); !reflect.DeepEqual(got, want) {
			t.Fatalf("the newer version's record changed:\n%+v\nwant %+v", got, want)
		}
		if r := mustRecord(t, after, "day-1.txt"); r.Source.Digest == mustRecord(t, after, "day-2.txt").Source.Digest {
			t.Fatalf("day-1.txt recorded with the newer version's source %+v", r.Source)
		}

		// Again: nothing to write, nothing changes.
		res, err = h.Publish(t2.Add(time.Minute), pipeA, "latest", v1)
		if err != nil || res.Plan.Changed || res.KeptNewer != 1 || res.Unchanged != 1 {
			t.Fatalf("redelivered older bundle: err %v, changed %v, kept_newer %d, unchanged %d", err, res.Plan.Changed, res.KeptNewer, res.Unchanged)
		}
		// An older bundle all of whose paths a newer version wrote: still
		// published, nothing written, the catalog not even rewritten.
		v0, _ := makeBundleAt(t, "weatherreporter.today", t0.Add(-time.Hour), map[string]string{"common.txt": "v0"})
		cat, version := readCatalog(t, root)
		res, err = h.Publish(t2.Add(time.Minute), pipeA, "latest", v0)
		if err != nil || res.Plan.Changed || res.KeptNewer != 1 || len(res.Written)+len(res.Updated)+res.Unchanged != 0 {
			t.Fatalf("older bundle of kept paths only: err %v, changed %v, kept_newer %d, written %d", err, res.Plan.Changed, res.KeptNewer, len(res.Written))
		}
		if gotCat, gotVersion := readCatalog(t, root); !reflect.DeepEqual(gotCat, cat) || gotVersion != version {
			t.Fatal("the catalog was rewritten for a publication that keeps every path")
		}

		// An operator rolls back on purpose: the older bytes win, and what
		// only the newer version brought stays unless asked to go.
		res, err = h.Publish(t2.Add(2*time.Minute), pipeA, "latest", v1, func(r *service.Request) { r.AllowOlder = true })
		if err != nil || res.KeptNewer != 0 {
			t.Fatalf("allow older: err %v, kept_newer %d", err, res.KeptNewer)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"common.txt"})
		wantStrings(t, "deleted", res.Deleted, nil)
		wantContents(t, root, map[string]string{"common.txt": "v1", "day-1.txt": "one", "day-2.txt": "two"})
		assertDescribesStorage(t, root)
		res, err = h.Publish(t2.Add(3*time.Minute), pipeA, "latest", v1, func(r *service.Request) { r.AllowOlder, r.DeleteLater = true, true })
		if err != nil {
			t.Fatalf("allow older, delete later: %v", err)
		}
		wantStrings(t, "deleted", res.Deleted, []string{"day-2.txt"})
		wantContents(t, root, map[string]string{"common.txt": "v1", "day-1.txt": "one"})
		assertDescribesStorage(t, root)
	})
}

func TestOwnerChangeKeepsCreatedAt(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		h.AddDest(named(base, "tides", planner.Additive), root, pipeB)
		t3 := t2.Add(time.Hour)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"shared.txt": "from A"})

		// Another owner overwrites the path with other bytes.
		res := h.MustPublish(t2, pipeB, "tides", "tides.now", map[string]string{"shared.txt": "from B"})
		wantStrings(t, "written", itemPaths(res.Written), []string{"shared.txt"})
		rec := mustRecord(t, assertDescribesStorage(t, root), "shared.txt")
		if rec.PipelineID != pipeB || rec.DestinationID != "tides" || rec.Source.ID != "tides.now" ||
			!rec.CreatedAt.Equal(t1) || !rec.UpdatedAt.Equal(t2) {
			t.Fatalf("after owner change: %+v, want owner %s/tides, created %s, updated %s", rec, pipeB, t1, t2)
		}

		// And back, with the same bytes: only the record changes.
		res = h.MustPublish(t3, pipeA, "latest", "weatherreporter.today", map[string]string{"shared.txt": "from B"})
		wantStrings(t, "written", itemPaths(res.Written), nil)
		wantStrings(t, "updated", itemPaths(res.Updated), []string{"shared.txt"})
		rec = mustRecord(t, assertDescribesStorage(t, root), "shared.txt")
		if rec.PipelineID != pipeA || rec.DestinationID != "latest" || !rec.CreatedAt.Equal(t1) || !rec.UpdatedAt.Equal(t3) {
			t.Fatalf("after second owner change: %+v, want owner %s/latest, created %s, updated %s", rec, pipeA, t1, t3)
		}
		wantContents(t, root, map[string]string{"shared.txt": "from B"})
	})
}

func TestRedeliveryIsANoOp(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		d := base
		d.Publish = config.Publish{Sources: true, HTML: true}
		d.Transforms = []config.Transform{{Name: config.MarkdownToHTML, Match: "**/*.md", Index: "report.md"}}
		h.AddDest(named(d, "latest", planner.Replacement), root, pipeA)
		dir, _ := makeBundle(t, "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n", "data/a.csv": "a\n"})
		if _, err := h.Publish(t1, pipeA, "latest", dir); err != nil {
			t.Fatal(err)
		}
		data, v, err := plain.ReadVersion(context.Background(), catalog.FileName)
		if err != nil {
			t.Fatal(err)
		}
		stored := contents(t, plain)
		root.Reset()

		res, err := h.Publish(t2, pipeA, "latest", dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Written)+len(res.Updated)+len(res.Deleted) != 0 || res.Unchanged != 3 || res.Plan.Changed {
			t.Fatalf("redelivery: written %v, updated %v, deleted %v, unchanged %d, changed %v; want 3 unchanged and nothing else",
				itemPaths(res.Written), itemPaths(res.Updated), res.Deleted, res.Unchanged, res.Plan.Changed)
		}
		for _, m := range []string{"Put", "Delete", "WriteIfVersion", "DeleteIfVersion"} {
			wantStrings(t, m+" calls (lock aside)", root.Calls(m), nil)
		}
		data2, v2, err := plain.ReadVersion(context.Background(), catalog.FileName)
		if err != nil {
			t.Fatal(err)
		}
		if v2 != v || !bytes.Equal(data, data2) {
			t.Fatalf("catalog changed on redelivery: version %s -> %s", v, v2)
		}
		wantContents(t, plain, stored)
	})
}

func TestCollisionBlocksTheWholePublication(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "latest", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a1", "old.txt": "old"})
		mustPut(t, plain, "b.txt", "someone else's")
		before := contents(t, plain)
		v := catalogVersion(t, plain)
		root.Reset()

		dir, _ := makeBundle(t, "weatherreporter.tomorrow", map[string]string{"a.txt": "a2", "b.txt": "mine", "c.txt": "new"})
		res, err := h.Publish(t2, pipeA, "latest", dir)
		if !errors.Is(err, engine.ErrCollision) {
			t.Fatalf("err = %v, want ErrCollision", err)
		}
		wantStrings(t, "collisions", res.Plan.Collisions, []string{"b.txt"})
		wantStrings(t, "written", itemPaths(res.Written), nil)
		for _, m := range []string{"Put", "Delete", "WriteIfVersion", "DeleteIfVersion"} {
			wantStrings(t, m+" calls (lock aside)", root.Calls(m), nil)
		}
		wantContents(t, plain, before)
		if got := catalogVersion(t, plain); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}
	})
}

// rootName is the last element of the root (folder name or key prefix), so
// that a sibling sharing its first letters can be placed outside it.
func rootName(d config.Destination) string {
	return filepath.Base(strings.TrimSuffix(d.Path, "/"))
}

func putLegacyCatalog(t *testing.T, root storage.Backend) []byte {
	t.Helper()
	data := testenv.CatalogFixture(t, testenv.LegacyV3SharedRoot)
	if _, err := root.WriteIfVersion(context.Background(), catalog.FileName, data, ""); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLegacyFirstRunAdditiveOverwritesPlannedPathsOnly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		putLegacyCatalog(t, root)
		for p, c := range map[string]string{"today/index.html": "old html", "today/report.md": "old md", "tides/index.html": "tides", "notes.txt": "n"} {
			mustPut(t, root, p, c)
		}

		res := h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"today/report.md": "new md", "fresh.txt": "f"})
		wantStrings(t, "written", itemPaths(res.Written), []string{"fresh.txt", "today/report.md"})
		for _, it := range res.Written {
			if it.Adopted {
				t.Fatalf("%s marked adopted on a legacy first run", it.Path)
			}
		}
		wantStrings(t, "deleted", res.Deleted, nil)
		wantContents(t, root, map[string]string{
			"today/index.html": "old html", "today/report.md": "new md", "tides/index.html": "tides", "notes.txt": "n", "fresh.txt": "f",
		})
		cat, _ := readCatalog(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"fresh.txt", "today/report.md"})
		if !cat.CreatedAt.Equal(t1) || !cat.UpdatedAt.Equal(t1) {
			t.Fatalf("catalog times %s/%s, want %s", cat.CreatedAt, cat.UpdatedAt, t1)
		}

		// What the legacy run left behind is unmanaged from now on.
		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"today/index.html": "new html"})
		res, err := h.Publish(t2, pipeA, "latest", dir)
		if !errors.Is(err, engine.ErrCollision) {
			t.Fatalf("err = %v, want ErrCollision on a left-behind legacy file", err)
		}
		wantStrings(t, "collisions", res.Plan.Collisions, []string{"today/index.html"})
	})
}

func TestLegacyFirstRunReplacementClearsOnlyInsideTheRoot(t *testing.T) {
	t.Parallel()
	forEachBackendEnv(t, func(t *testing.T, env backendEnv) {
		h := newHarness(t)
		root, base := env.NewRoot(t)
		outside := env.Outside(t, base)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		putLegacyCatalog(t, root)
		for p, c := range map[string]string{"today/index.html": "old", "notes.txt": "n", "deep/a/b.txt": "b", "keep.txt": "k"} {
			mustPut(t, root, p, c)
		}
		// Beside the root: the same names, and a sibling whose name starts
		// with the root's (a prefix match without the "/" would hit it).
		sibling := rootName(base) + "x/keep.txt"
		outsideWant := map[string]string{"keep.txt": "outside", "notes.txt": "outside notes", sibling: "sibling"}
		for p, c := range outsideWant {
			mustPut(t, outside, p, c)
		}

		res := h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"keep.txt": "new k", "new.txt": "new"})
		wantStrings(t, "written", itemPaths(res.Written), []string{"keep.txt", "new.txt"})
		wantStrings(t, "deleted", res.Deleted, []string{"deep/a/b.txt", "notes.txt", "today/index.html"})
		wantContents(t, root, map[string]string{"keep.txt": "new k", "new.txt": "new"})
		cat := assertDescribesStorage(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"keep.txt", "new.txt"})
		for p, c := range outsideWant {
			if got := mustRead(t, outside, p); got != c {
				t.Fatalf("outside %s = %q, want %q", p, got, c)
			}
		}
	})
}

func TestEmptyReplacementIsRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b"})
		before, v := contents(t, root), catalogVersion(t, root)

		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{})
		_, err := h.Publish(t2, pipeA, "archive", dir)
		if !errors.Is(err, planner.ErrEmptyReplacement) {
			t.Fatalf("err = %v, want ErrEmptyReplacement", err)
		}
		wantContents(t, root, before)
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}
	})
}

func TestMaxDeletesAbortsThePublication(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		d := named(base, "archive", planner.Replacement)
		d.MaxDeletes = 1
		h.AddDest(d, root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
		before, v := contents(t, root), catalogVersion(t, root)

		// Two deletes (and an update that must not land either).
		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a changed"})
		res, err := h.Publish(t2, pipeA, "archive", dir)
		if !errors.Is(err, planner.ErrTooManyDeletes) {
			t.Fatalf("err = %v, want ErrTooManyDeletes", err)
		}
		if len(res.Written)+len(res.Deleted) != 0 {
			t.Fatalf("written %v, deleted %v; want nothing", itemPaths(res.Written), res.Deleted)
		}
		wantContents(t, root, before)
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}
	})
}

func TestTakeOwnershipAdoptsOnlyCollidingPaths(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"m.txt": "managed"})
		mustPut(t, root, "b.txt", "theirs")
		mustPut(t, root, "u.txt", "untouched")

		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"m.txt": "managed 2", "b.txt": "mine", "a.txt": "new"})
		res, err := h.Publish(t2, pipeA, "latest", dir, func(r *service.Request) { r.TakeOwnership = true })
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"a.txt", "b.txt", "m.txt"})
		for _, it := range res.Written {
			if want := it.Path == "b.txt"; it.Adopted != want {
				t.Fatalf("%s: Adopted = %v, want %v", it.Path, it.Adopted, want)
			}
		}
		wantContents(t, root, map[string]string{"a.txt": "new", "b.txt": "mine", "m.txt": "managed 2", "u.txt": "untouched"})
		cat, _ := readCatalog(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"a.txt", "b.txt", "m.txt"})
		if b := mustRecord(t, cat, "b.txt"); !b.CreatedAt.Equal(t2) || b.PipelineID != pipeA {
			t.Fatalf("adopted record %+v, want created %s by %s", b, t2, pipeA)
		}
	})
}

// TestGeneratedHTMLRecordHasTheSeedShape publishes the seed's own example
// and compares the whole catalog file with the seed's, byte for byte, once
// the digests and size (which depend on the rendered bytes) are filled in.
func TestGeneratedHTMLRecordHasTheSeedShape(t *testing.T) {
	t.Parallel()
	seed := testenv.CatalogFixture(t, testenv.SeedExample)
	const (
		seedSourceDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		seedSHA256       = "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
		seedSize         = `"size": 12345,`
	)
	for _, s := range []string{seedSourceDigest, seedSHA256, seedSize} {
		if bytes.Count(seed, []byte(s)) != 1 {
			t.Fatalf("seed example does not hold %s exactly once", s)
		}
	}
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		h.Service.Engine.Version = "dev"
		root, base := newRoot(t)
		d := named(base, "latest-html", planner.Additive)
		d.Layout = config.Layout{Prefix: "{source_name}/"}
		d.Publish = config.Publish{HTML: true, Include: []string{"**"}}
		d.Transforms = []config.Transform{{Name: config.MarkdownToHTML, Match: "**/*.md", Index: "report.md"}}
		d.Links = config.Links{BaseURL: "https://reports.example.com/weather/", Pretty: true}
		h.AddDest(d, root, "weatherreporter.daily")

		// First published at 12:00, republished with new content at 12:05.
		h.MustPublish(t0, "weatherreporter.daily", "latest-html", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n\nSunny.\n"})
		dir, digest := makeBundle(t, "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n\nRain.\n"})
		res, err := h.Publish(t1, "weatherreporter.daily", "latest-html", dir)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"tomorrow/index.html"})
		html := mustRead(t, root, "tomorrow/index.html")
		if !strings.Contains(html, "Rain.") {
			t.Fatalf("rendered page lacks the new content:\n%s", html)
		}

		want := bytes.Replace(seed, []byte(seedSourceDigest), []byte(digest), 1)
		want = bytes.Replace(want, []byte(seedSHA256), []byte(digestOf([]byte(html))), 1)
		want = bytes.Replace(want, []byte(seedSize), fmt.Appendf(nil, `"size": %d,`, len(html)), 1)
		got, _, err := root.ReadVersion(context.Background(), catalog.FileName)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("catalog differs from the seed example:\n%s\nwant\n%s", got, want)
		}
		// Key order, checked on its own so that a failure says what moved.
		if g, w := jsonKeys(t, got), jsonKeys(t, seed); !equalStrings(g, w) {
			t.Fatalf("keys in order:\n%q\nwant\n%q", g, w)
		}
	})
}

// jsonKeys lists every object key of a JSON document in document order,
// each with its depth.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	type frame struct{ object, wantKey bool }
	var (
		out   []string
		stack []frame
	)
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				stack = append(stack, frame{object: v == '{', wantKey: v == '{'})
			} else {
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				out = append(out, fmt.Sprintf("%d:%s", n, v))
				stack[n-1].wantKey = false
				continue
			}
		}
		valueDone()
	}
}

func TestRepublishingOneChangedFileCostsOnePut(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		republishingOneChangedFile(t, newRoot)
	})
}

func republishingOneChangedFile(t *testing.T, newRoot newRootFunc) {
	{
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		files := map[string]string{}
		for i := range 100 {
			files[fmt.Sprintf("data/f%03d.txt", i)] = fmt.Sprintf("file %d\n", i)
		}
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", files)
		files["data/f042.txt"] = "file 42, changed\n"
		dir, _ := makeBundle(t, "weatherreporter.today", files)
		var src *countingBackend
		h.Stores.SetWrapBundle(func(b storage.Backend) storage.Backend {
			src = newCounting(b)
			return src
		})
		root.Reset()

		res, err := h.Publish(t2, pipeA, "archive", dir)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"data/f042.txt"})
		if len(res.Updated) != 99 || res.Unchanged != 0 {
			// The source digest changed, so every other record is updated in place.
			t.Fatalf("updated %d, unchanged %d; want 99 record-only updates", len(res.Updated), res.Unchanged)
		}
		// One shard of the fingerprint index is rewritten: f042.txt is a
		// new version.
		wantStrings(t, "destination Put", root.Calls("Put"), []string{"data/f042.txt"})
		wantStrings(t, "destination Overwrite", root.Calls("Overwrite"), []string{engine.FingerprintsFile("data/f042.txt", 1)})
		// The intent is written only where none is, and removed only while
		// it is still this run's (a stale holder never replaces or removes
		// a newer holder's); the catalog is committed once.
		wantStrings(t, "destination WriteIntent", root.Calls("WriteIntent"), []string{""})
		wantStrings(t, "destination ClearIntent", root.Calls("ClearIntent"), []string{""})
		wantStrings(t, "destination CommitCatalog", root.Calls("CommitCatalog"), []string{catalog.FileName})
		wantStrings(t, "destination WriteIfVersion", root.Calls("WriteIfVersion"), nil)
		wantStrings(t, "destination Delete", root.Calls("Delete"), nil)
		wantStrings(t, "destination Open", root.Calls("Open"), nil)
		// No write flushes on its own: the output is covered by the one
		// sync before the commit, the index shard needs none (it is
		// advisory).
		wantStrings(t, "durable destination Put", root.Calls("PutDurable"), nil)
		wantStrings(t, "destination DeleteIfVersion", root.Calls("DeleteIfVersion"), nil)
		// Reads: one question about the publication's paths (no listing
		// or Stat of the engine's own: on S3 a HEAD each), the catalog,
		// intent and pending report, and the index shards of the outputs,
		// each once.
		wantStrings(t, "destination Find", root.Calls("Find"), slices.Sorted(maps.Keys(files)))
		wantStrings(t, "destination List", root.Calls("List"), nil)
		wantStrings(t, "destination Stat", root.Calls("Stat"), nil)
		wantStrings(t, "destination ReadIntent", root.Calls("ReadIntent"), []string{""})
		wantReads := []string{catalog.FileName, ".distributor/reports/"}
		for p := range files {
			if sh := engine.FingerprintsFile(p, engine.FingerprintShards(len(files))); !slices.Contains(wantReads, sh) {
				wantReads = append(wantReads, sh)
			}
		}
		sort.Strings(wantReads)
		var reads []string
		for _, p := range root.Calls("ReadVersion") {
			if strings.HasPrefix(p, ".distributor/reports/") {
				p = ".distributor/reports/" // named by the event id
			}
			reads = append(reads, p)
		}
		wantStrings(t, "destination ReadVersion", reads, wantReads)
		// The changed file is read once: hashed while it is staged, named
		// once verified. Its size is not checked up front: staging names
		// nothing unverified, and checks sizes only if it fails.
		wantOpens := []string{"data/f042.txt", bundle.ManifestName}
		var wantStats []string
		wantStrings(t, "destination Commit", root.Calls("Commit"), []string{"data/f042.txt"})
		wantStrings(t, "bundle Open", src.Calls("Open"), wantOpens)
		wantStrings(t, "bundle Stat", src.Calls("Stat"), wantStats)
		// No Put flushes on its own: the intent is a conditional write
		// (durable on return), outputs wait for the one barrier, the
		// fingerprint index for writeback.
		wantStrings(t, "destination durable Put", root.Calls("PutDurable"), nil)
		wantContents(t, plain, files)
		assertDescribesStorage(t, plain)
	}
}

func TestDigestMismatchFailsBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"a.txt": "a1"})
		before, v := contents(t, plain), catalogVersion(t, plain)
		dir, digest := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a2"})
		_, announced := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a3"})
		root.Reset()

		_, err := h.Publish(t2, pipeA, "archive", dir, func(r *service.Request) { r.ManifestDigest = announced })
		if !errors.Is(err, bundle.ErrDigestMismatch) {
			t.Fatalf("err = %v, want ErrDigestMismatch", err)
		}
		if n := root.Total(); n != 0 {
			t.Fatalf("%d calls reached the destination (lock included), want none", n)
		}
		wantContents(t, plain, before)
		if got := catalogVersion(t, plain); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}

		// The right digest goes through (the check is not refusing everything).
		if _, err := h.Publish(t2, pipeA, "archive", dir, func(r *service.Request) { r.ManifestDigest = digest }); err != nil {
			t.Fatal(err)
		}
		wantContents(t, plain, map[string]string{"a.txt": "a2"})
	})
}

// flipFileByte damages a bundle file in place, keeping its size.
func flipFileByte(t *testing.T, name string) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0x20
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedBundleFileNeverLands(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"a.txt": "alpha-1", "b.txt": "bravo-1", "c.txt": "charlie"})
		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "alpha-2", "b.txt": "bravo-2", "c.txt": "charlie", "d.txt": "delta-2"})
		// Same size, other bytes: the size pre-flight passes, hashing must not.
		flipFileByte(t, filepath.Join(dir, "b.txt"))
		flipFileByte(t, filepath.Join(dir, "d.txt"))

		before := contents(t, root)
		_, err := h.Publish(t2, pipeA, "archive", dir)
		if !errors.Is(err, bundle.ErrContentMismatch) {
			t.Fatalf("err = %v, want ErrContentMismatch", err)
		}
		// Not even the undamaged a.txt changed: nothing is visible before
		// every file to copy is verified.
		if got := contents(t, root); !maps.Equal(got, before) {
			t.Fatalf("root after a damaged bundle = %q, want it unchanged: %q", got, before)
		}
		cat := assertDescribesStorage(t, root)
		if b := mustRecord(t, cat, "b.txt"); b.SHA256 != digestOf([]byte("bravo-1")) {
			t.Fatalf("b.txt record %s, want the old bytes' digest", b.SHA256)
		}

		// Repaired bundle (same manifest): the retry converges.
		for p, c := range map[string]string{"b.txt": "bravo-2", "d.txt": "delta-2"} {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Publish(t2, pipeA, "archive", dir); err != nil {
			t.Fatal(err)
		}
		wantContents(t, root, map[string]string{"a.txt": "alpha-2", "b.txt": "bravo-2", "c.txt": "charlie", "d.txt": "delta-2"})
		assertDescribesStorage(t, root)
	})
}

// Missing bundle files are reported all at once, whether the backend stages
// the writes (sizes checked only after a failure) or checks them up front.
func TestMissingBundleFilesAreNamedTogether(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", map[string]string{"a.txt": "alpha-1"})
		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "alpha-2", "b.txt": "bravo-2", "c.txt": "charlie", "d.txt": "delta-2"})
		for _, p := range []string{"b.txt", "d.txt"} {
			if err := os.Remove(filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
		}
		before := contents(t, root)
		_, err := h.Publish(t2, pipeA, "archive", dir)
		want := fmt.Sprintf("bundle %s: %s: %q, %q", dir, bundle.ErrMissingFile, "b.txt", "d.txt")
		if !errors.Is(err, bundle.ErrMissingFile) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want ErrMissingFile as %q", err, want)
		}
		if got := contents(t, root); !maps.Equal(got, before) {
			t.Fatalf("root after a bundle with missing files = %q, want it unchanged: %q", got, before)
		}
		assertDescribesStorage(t, root)
	})
}

func TestConcurrentPublicationsOnOneRootConverge(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		h.AddDest(named(base, "tides", planner.Additive), root, pipeB)
		type job struct{ pipeline, dest, dir string }
		want := map[string]string{}
		held := 0
		for round := range 3 {
			var jobs []job
			for _, j := range []job{{pipeA, "latest", "w"}, {pipeB, "tides", "t"}} {
				files := map[string]string{}
				for i := range 8 {
					p := fmt.Sprintf("%s/%d.txt", j.dir, i)
					files[p] = fmt.Sprintf("%s round %d\n", p, round)
					want[p] = files[p]
				}
				// Each round is a newer version of the pipeline's source.
				j.dir, _ = makeBundleAt(t, j.pipeline+".src", t0.Add(time.Duration(round)*time.Minute), files)
				jobs = append(jobs, j)
			}
			var (
				wg    sync.WaitGroup
				errs  = make([]error, len(jobs))
				start = make(chan struct{})
			)
			for i, j := range jobs {
				wg.Go(func() {
					<-start
					_, errs[i] = h.Publish(t1, j.pipeline, j.dest, j.dir)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, lease.ErrHeld):
					held++
					if _, err := h.Publish(t1, jobs[i].pipeline, jobs[i].dest, jobs[i].dir); err != nil {
						t.Fatalf("rerun after ErrHeld: %v", err)
					}
				default:
					t.Fatalf("concurrent publication %d: %v", i, err)
				}
			}
			wantContents(t, root, want)
			assertDescribesStorage(t, root)
			if _, err := root.Stat(context.Background(), lease.LockPath); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("lock object left behind: %v", err)
			}
		}
		t.Logf("%d of 6 publications met a held lease and were rerun", held)

		// With Runner.LeaseWait the second one waits its turn instead.
		h.Service.LeaseWait = 10 * time.Second
		var (
			wg   sync.WaitGroup
			errs [2]error
		)
		for i, j := range []struct{ pipeline, dest, prefix string }{{pipeA, "latest", "w"}, {pipeB, "tides", "t"}} {
			files := map[string]string{j.prefix + "/waited.txt": "waited"}
			want[j.prefix+"/waited.txt"] = "waited"
			dir, _ := makeBundleAt(t, j.pipeline+".src", t0.Add(time.Hour), files)
			wg.Go(func() { _, errs[i] = h.Publish(t1, j.pipeline, j.dest, dir) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("publication %d with LeaseWait: %v", i, err)
			}
		}
		wantContents(t, root, want)
		assertDescribesStorage(t, root)
	})
}

// racingBackend lets another writer commit the catalog just before the
// engine's next catalog compare-and-swap, once armed.
type racingBackend struct {
	storage.Backend
	mu    sync.Mutex
	armed bool
}

func (r *racingBackend) arm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = true
}

func (r *racingBackend) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return racingCommit{r.Backend.PrepareCatalog(ctx, next, writes), r}
}

type racingCommit struct {
	storage.PendingCatalog
	r *racingBackend
}

func (c racingCommit) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	c.r.mu.Lock()
	fire := c.r.armed
	c.r.armed = false
	c.r.mu.Unlock()
	if fire {
		if _, err := commitAnotherCatalog(ctx, c.r.Backend); err != nil {
			return "", fmt.Errorf("racing writer: %w", err)
		}
	}
	return c.PendingCatalog.Commit(ctx, want)
}

// commitAnotherCatalog commits the root's catalog as another writer would
// (one second later, nothing else changed) and returns the bytes it wrote.
func commitAnotherCatalog(ctx context.Context, root storage.Backend) ([]byte, error) {
	cur, v, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil {
		return nil, err
	}
	cat, _, err := catalog.Parse(cur)
	if err != nil {
		return nil, err
	}
	cat.UpdatedAt = cat.UpdatedAt.Add(time.Second)
	theirs, err := catalog.Marshal(cat)
	if err != nil {
		return nil, err
	}
	if _, err := root.WriteIfVersion(ctx, catalog.FileName, theirs, v); err != nil {
		return nil, err
	}
	return theirs, nil
}

func TestLostCatalogCompareAndSwapIsAnErrorAndARerunConverges(t *testing.T) {
	t.Parallel()
	v1 := map[string]string{"a.txt": "a1", "b.txt": "b1"}
	v2 := map[string]string{"a.txt": "a2", "c.txt": "c2"}
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		// The uninterrupted run, for reference.
		ref := newHarness(t)
		refRoot, refBase := newRoot(t)
		ref.AddDest(named(refBase, "archive", planner.Replacement), refRoot, pipeA)
		ref.MustPublish(t1, pipeA, "archive", "weatherreporter.today", v1)
		ref.MustPublish(t2, pipeA, "archive", "weatherreporter.today", v2)
		wantCatalog, _, err := refRoot.ReadVersion(context.Background(), catalog.FileName)
		if err != nil {
			t.Fatal(err)
		}

		h := newHarness(t)
		plain, base := newRoot(t)
		root := &racingBackend{Backend: plain}
		h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", v1)
		dir, _ := makeBundleAt(t, "weatherreporter.today", t2.Add(-time.Hour), v2) // as mustPublish at t2
		root.arm()
		_, err = h.Publish(t2, pipeA, "archive", dir)
		if !errors.Is(err, engine.ErrCatalogRace) {
			t.Fatalf("err = %v, want ErrCatalogRace", err)
		}

		res, err := h.Publish(t2, pipeA, "archive", dir)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Recovered {
			t.Fatal("rerun did not recover the interrupted publication")
		}
		wantContents(t, plain, contents(t, refRoot))
		assertDescribesStorage(t, plain)
		got, _, err := plain.ReadVersion(context.Background(), catalog.FileName)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantCatalog) {
			t.Fatalf("catalog after rerun:\n%s\nuninterrupted run:\n%s", got, wantCatalog)
		}
	})
}
