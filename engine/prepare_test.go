package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
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

func (c *callOrder) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	c.add(fmt.Sprintf("prepare beside %d writes", writes))
	return pendingLog{c.Backend.PrepareCatalog(ctx, next, writes), c}
}

// ClearIntent (the intent dropped) logs the temp files the root holds
// then.
func (c *callOrder) hookClearIntent(ctx context.Context, want storage.Version) error {
	c.add(fmt.Sprintf("drop intent, temp files %q", tempFiles(c.t, c.String())))
	return c.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

type pendingLog struct {
	storage.PendingCatalog
	c *callOrder
}

func (p pendingLog) Commit(ctx context.Context, v storage.Version) (storage.Version, error) {
	p.c.add("commit")
	return p.PendingCatalog.Commit(ctx, v)
}

// TestTheCatalogIsPreparedBeforeThePublicationsFlush: a publication
// hands its next catalog to the root before the one flush (Sync) that
// makes its outputs durable, so that the root can write its bytes for
// that flush to cover, and commits it after; the intent goes last, when
// no temp file is left. A republish that only updates records flushes
// only the last intent's removal (SyncIntent).
func TestTheCatalogIsPreparedBeforeThePublicationsFlush(t *testing.T) {
	for _, streamMin := range []int{0, 8} { // a small catalog, a large one
		b, err := local.New(t.TempDir(), local.WithStreamMinOutputs(streamMin))
		if err != nil {
			t.Fatal(err)
		}
		root := &callOrder{Backend: b, t: t}
		for v := range 2 {
			root.log = nil
			if _, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Replacement, eventID: "ev-1"},
				largeTree(v), fixedNow.Add(time.Duration(v-3)*time.Hour)); err != nil {
				t.Fatal(err)
			}
			writes := len(largeTree(v))
			if v == 1 {
				writes = 0
				for p, data := range largeTree(1) {
					if largeTree(0)[p] != data {
						writes++
					}
				}
			}
			want := []string{fmt.Sprintf("prepare beside %d writes", writes), "sync", "commit", `drop intent, temp files []`}
			if !slices.Equal(root.log, want) {
				t.Fatalf("stream min %d, publication %d: %q, want %q", streamMin, v+1, root.log, want)
			}
			assertDescribesStorage(t, root)
		}
		root.log = nil
		res, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Replacement, eventID: "ev-2"},
			largeTree(1), fixedNow.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Written) != 0 || len(res.Updated) != len(largeTree(1)) {
			t.Fatalf("record-only republish wrote %d and updated %d, want 0 and %d", len(res.Written), len(res.Updated), len(largeTree(1)))
		}
		if want := []string{"prepare beside 0 writes", "sync", "commit"}; !slices.Equal(root.log, want) {
			t.Fatalf("stream min %d, record-only republish: %q, want %q", streamMin, root.log, want)
		}
		assertDescribesStorage(t, root)
		if left := tempFiles(t, b.String()); len(left) > 0 {
			t.Fatalf("stream min %d: temp files %q left", streamMin, left)
		}
	}
}

// Dispatch of the contract's calls to the hooks above.

func (c *callOrder) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return c.hookClearIntent(ctx, want)
	}
	return c.Backend.DeleteIfVersion(ctx, p, want, opts...)
}
