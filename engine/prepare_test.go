package engine_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// callOrder is a local root that logs its barriers and catalog writes.
type callOrder struct {
	*local.Backend
	t   *testing.T
	mu  sync.Mutex
	log []string
}

func (c *callOrder) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *callOrder) Sync(ctx context.Context) error {
	c.add("sync")
	return c.Backend.Sync(ctx)
}

func (c *callOrder) WriteIfVersion(ctx context.Context, p string, data []byte, v storage.Version) (storage.Version, error) {
	c.add("write " + p)
	return c.Backend.WriteIfVersion(ctx, p, data, v)
}

func (c *callOrder) PrepareVersion(ctx context.Context, p string, data []byte) (storage.PreparedVersion, error) {
	c.add("prepare " + p)
	pv, err := c.Backend.PrepareVersion(ctx, p, data)
	if err != nil {
		return nil, err
	}
	return preparedLog{pv, c, p}, nil
}

func (c *callOrder) PrepareVersionFrom(ctx context.Context, p string, write func(io.Writer) error) (storage.PreparedVersion, error) {
	c.add("prepare-from " + p)
	pv, err := c.Backend.PrepareVersionFrom(ctx, p, write)
	if err != nil {
		return nil, err
	}
	return preparedLog{pv, c, p}, nil
}

func (c *callOrder) WriteIfVersionFrom(ctx context.Context, p string, write func(io.Writer) error, v storage.Version) (storage.Version, error) {
	c.add("write-from " + p)
	return c.Backend.WriteIfVersionFrom(ctx, p, write, v)
}

// EmptyDeferSyncIf (the intent dropped) logs the temp files the root
// holds then.
func (c *callOrder) EmptyDeferSyncIf(ctx context.Context, p string, want []byte) error {
	c.add(fmt.Sprintf("drop %s, temp files %q", p, tempFiles(c.t, c.String())))
	return c.Backend.EmptyDeferSyncIf(ctx, p, want)
}

type preparedLog struct {
	storage.PreparedVersion
	c *callOrder
	p string
}

func (p preparedLog) Place() error {
	p.c.add("place " + p.p)
	return p.PreparedVersion.(interface{ Place() error }).Place()
}

func (p preparedLog) CommitIfVersion(ctx context.Context, v storage.Version) (storage.Version, error) {
	p.c.add("commit " + p.p)
	return p.PreparedVersion.CommitIfVersion(ctx, v)
}

// TestCatalogBytesGoOutBeforeThePublicationsFlush: a publication into a
// local root writes its catalog's bytes before the one syncfs that makes
// its outputs durable, and only names them after it, so that flush covers
// them too (no fsync of the catalog file); the catalog is never written
// whole after the flush.
func TestCatalogBytesGoOutBeforeThePublicationsFlush(t *testing.T) {
	b, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := &callOrder{Backend: b, t: t}
	for i, files := range []map[string]string{dropFiles, {"data/a.csv": "a2\n", "data/c.csv": "c\n"}} {
		root.log = nil
		if _, err := publish(t, root, planner.Replacement, files, fixedNow.Add(time.Duration(i-3)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		want := []string{"prepare " + catalog.FileName, "place " + catalog.FileName, "sync", "commit " + catalog.FileName, `drop .distributor/intent.json, temp files []`}
		if !slices.Equal(root.log, want) {
			t.Fatalf("publication %d: %q, want %q", i+1, root.log, want)
		}
		assertDescribesStorage(t, root)
	}
}

// TestALargeCatalogIsEncodedIntoItsFileBeforeThePublicationsFlush: a
// catalog past the size written whole is encoded into its temp file while
// the outputs are named (PrepareVersionFrom), before the one syncfs, and
// named after it; the outputs' replaced files, swapped out, are gone
// before the intent is dropped (a crash until then leaves them to the
// intent's recovery).
func TestALargeCatalogIsEncodedIntoItsFileBeforeThePublicationsFlush(t *testing.T) {
	b, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := &callOrder{Backend: b, t: t}
	for v := range 2 {
		root.log = nil
		if _, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Replacement, eventID: "ev-1", streamMin: 8},
			largeTree(v), fixedNow.Add(time.Duration(v-3)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		want := []string{"prepare-from " + catalog.FileName, "place " + catalog.FileName, "sync", "commit " + catalog.FileName, `drop .distributor/intent.json, temp files []`}
		if !slices.Equal(root.log, want) {
			t.Fatalf("publication %d: %q, want %q", v+1, root.log, want)
		}
		assertDescribesStorage(t, root)
		if left := tempFiles(t, b.String()); len(left) > 0 {
			t.Fatalf("publication %d left temp files %q", v+1, left)
		}
	}
	// A republish that only updates records has no flush to write its
	// catalog before: the commit streams it (and flushes it) itself.
	root.log = nil
	res, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Replacement, eventID: "ev-2", streamMin: 8},
		largeTree(1), fixedNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 0 || len(res.Updated) != len(largeTree(1)) {
		t.Fatalf("record-only republish wrote %d and updated %d, want 0 and %d", len(res.Written), len(res.Updated), len(largeTree(1)))
	}
	if want := []string{"write-from " + catalog.FileName}; !slices.Equal(root.log, want) {
		t.Fatalf("record-only republish: %q, want %q", root.log, want)
	}
	assertDescribesStorage(t, root)
	// One that writes fewer than 8 outputs has nothing to encode it beside:
	// the commit streams it after the flush, as before.
	root.log = nil
	files := largeTree(1)
	files["data/one-more.csv"] = "more\n"
	if _, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Replacement, eventID: "ev-3", streamMin: 8},
		files, fixedNow); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sync", "write-from " + catalog.FileName, `drop .distributor/intent.json, temp files []`}; !slices.Equal(root.log, want) {
		t.Fatalf("republish adding one output: %q, want %q", root.log, want)
	}
	assertDescribesStorage(t, root)
}
