package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage/local"
)

// syncCounting is a local root that counts its file-system flushes
// (Sync); every other method is the backend's own.
type syncCounting struct {
	*local.Backend
	syncs atomic.Int32
}

func (s *syncCounting) Sync(ctx context.Context) error {
	s.syncs.Add(1)
	return s.Backend.Sync(ctx)
}

func newSyncCounting(t *testing.T) (*syncCounting, config.Destination) {
	t.Helper()
	b, d := newLocalRoot(t)
	return &syncCounting{Backend: b}, d
}

// A publication calls Sync once, before its commit, whether it wrote or
// only updates records (a new source version with the same bytes): what
// that flush costs is the backend's (a local root flushes the file system
// only after writes: storage/local TestSyncFlushesOnlyWhatIsDirty).
func TestPublicationSyncsOnceBeforeItsCommit(t *testing.T) {
	h := newHarness(t)
	root, base := newSyncCounting(t)
	h.AddDest(named(base, "latest", planner.Replacement), root, pipeA)
	files := map[string]string{"a.txt": "a", "d/b.txt": "b", "d/c.txt": "c"}
	h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", files)
	if n := root.syncs.Load(); n != 1 {
		t.Fatalf("first publication: %d flushes, want 1", n)
	}

	root.syncs.Store(0)
	res := h.MustPublish(t2, pipeA, "latest", "weatherreporter.today", files)
	wantStrings(t, "written", itemPaths(res.Written), nil)
	wantStrings(t, "updated", itemPaths(res.Updated), []string{"a.txt", "d/b.txt", "d/c.txt"})
	if n := root.syncs.Load(); n != 1 {
		t.Fatalf("record-only republish: %d Sync calls, want 1", n)
	}
	cat := assertDescribesStorage(t, root)
	for p := range files {
		if rec := mustRecord(t, cat, p); !rec.UpdatedAt.Equal(t2) || !rec.CreatedAt.Equal(t1) || !rec.Source.Created.Equal(t2.Add(-time.Hour)) {
			t.Fatalf("%s after the record-only republish: %+v, want created %s, updated %s, source created %s", p, rec, t1, t2, t2.Add(-time.Hour))
		}
	}

	root.syncs.Store(0)
	files["d/b.txt"] = "b2"
	res = h.MustPublish(t2.Add(time.Hour), pipeA, "latest", "weatherreporter.today", files)
	wantStrings(t, "written", itemPaths(res.Written), []string{"d/b.txt"})
	if n := root.syncs.Load(); n != 1 {
		t.Fatalf("republish writing one output: %d flushes, want 1", n)
	}
	wantContents(t, root, map[string]string{"a.txt": "a", "d/b.txt": "b2", "d/c.txt": "c"})
}

// A publication asks the root once about its paths (while the catalog is
// parsed) and still plans by the rules: an unmanaged file in the way of a
// wanted path blocks the publication.
func TestLargePublicationListsTheRootOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "latest", planner.Replacement), root, pipeA)
		files := map[string]string{}
		for i := range 40 {
			files[fmt.Sprintf("d%d/f%02d.txt", i%4, i)] = "v1"
		}
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", files)
		mustPut(t, plain, "d9/f00.txt/inside", "someone else's")

		root.Reset()
		files["d0/f00.txt"] = "v2"
		res := h.MustPublish(t2, pipeA, "latest", "weatherreporter.today", files)
		wantStrings(t, "written", itemPaths(res.Written), []string{"d0/f00.txt"})
		wantStrings(t, "Find calls", root.Calls("Find"), slices.Sorted(maps.Keys(files)))
		wantStrings(t, "List calls", root.Calls("List"), nil)
		wantStrings(t, "Stat calls", root.Calls("Stat"), nil)

		root.Reset()
		files["d9/f00.txt"] = "mine"
		dir, _ := makeBundleAt(t, "weatherreporter.today", t2.Add(time.Hour), files)
		res, err := h.Publish(t2.Add(time.Hour), pipeA, "latest", dir)
		if !errors.Is(err, engine.ErrCollision) {
			t.Fatalf("err = %v, want ErrCollision", err)
		}
		wantStrings(t, "collisions", res.Plan.Collisions, []string{"d9/f00.txt"})
		wantStrings(t, "Find calls", root.Calls("Find"), slices.Sorted(maps.Keys(files)))
	})
}

// An invalid catalog fails a large publication (whose listing started
// before the catalog was parsed) like any other, writing nothing.
func TestLargePublicationRefusesAnInvalidCatalog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "latest", planner.Replacement), root, pipeA)
		mustPut(t, plain, catalog.FileName, `{"schema_version": 4, "outputs": [{"path": "../x"}]}`)
		before := contents(t, plain)
		root.Reset()
		dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b"})
		_, err := h.Publish(t1, pipeA, "latest", dir)
		if !errors.Is(err, catalog.ErrInvalid) {
			t.Fatalf("err = %v, want catalog.ErrInvalid", err)
		}
		wantStrings(t, "Put calls (lock aside)", root.Calls("Put"), nil)
		wantContents(t, plain, before)
	})
}

// A republish of many outputs reads every fingerprint shard exactly once
// (while the root is listed), vouches for every output it keeps without
// reading any back, and writes only the changed one; a small publication
// to the same root reads only its own paths' shard.
// (Local only: the engine's reads are the same on S3, and 1,100 objects
// there cost seconds of test time.)
func TestRepublishReadsEachFingerprintShardOnce(t *testing.T) {
	h := newHarness(t)
	local, base := newSyncCounting(t)
	plain := local.Backend
	root := newCounting(plain)
	h.AddDest(named(base, "site", planner.Replacement), root, pipeA)
	files := map[string]string{}
	for i := range 1100 {
		files[fmt.Sprintf("d%d/f%04d.txt", i%5, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "site", "weatherreporter.v", files)
	shards := shardFiles(t, plain)
	wantStrings(t, "shards", shards, []string{"2-00", "2-01"})

	root.Reset()
	files["d0/f0000.txt"] = "changed\n"
	res := h.MustPublish(t2, pipeA, "site", "weatherreporter.v", files)
	wantStrings(t, "written", itemPaths(res.Written), []string{"d0/f0000.txt"})
	if len(res.Updated) != 1099 {
		t.Fatalf("%d records updated, want 1099", len(res.Updated))
	}
	wantStrings(t, "outputs read back", readBack(root), nil)
	var read []string
	for _, p := range root.Calls("ReadVersion") {
		if strings.HasPrefix(p, engine.FingerprintsDir+"/") {
			read = append(read, strings.TrimPrefix(p, engine.FingerprintsDir+"/"))
		}
	}
	wantStrings(t, "shards read", read, shards)

	root.Reset()
	other := named(base, "other", planner.Additive)
	h.AddDest(other, root, pipeB)
	h.MustPublish(t2, pipeB, "other", "tides.v", map[string]string{"x/one.txt": "1"})
	read = nil
	for _, p := range root.Calls("ReadVersion") {
		if strings.HasPrefix(p, engine.FingerprintsDir+"/") {
			read = append(read, p)
		}
	}
	if len(read) > 1 {
		t.Fatalf("a one-output publication read shards %q, want at most its own", read)
	}
}
