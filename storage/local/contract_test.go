package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
)

// testCatalog is a valid catalog of n records.
func testCatalog(n int) *catalog.Catalog {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return catalog.Digest(sum[:])
	}
	c := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	for i := range n {
		p := fmt.Sprintf("out/%04d.bin", i)
		c.Outputs = append(c.Outputs, catalog.Output{Path: p, PipelineID: "p", DestinationID: "d",
			Source: catalog.Source{ID: "b", Digest: digest("b"), Created: at}, Kind: catalog.KindSource,
			SHA256: digest(p), Size: int64(i), CreatedAt: at, UpdatedAt: at})
	}
	return c
}

// pendingTaken is what a Sync's pendingCatalogs.ready takes first: the
// catalogs pending then, which it readies one by one after.
func pendingTaken(b *Backend) []*pendingCatalog {
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	var cs []*pendingCatalog
	for c := range b.pending.set {
		cs = append(cs, c)
	}
	return cs
}

// A Sync that took a pending catalog before its Close, and readies it
// after, writes nothing of it: Close drops the bytes, even those a Sync
// was about to write.
func TestPendingCatalogClosedWhileASyncTookIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		records, writes int
	}{
		{"held whole", 3, 0},
		{"encoded beside the writes", 20, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, err := New(t.TempDir(), WithStreamMinOutputs(8))
			must(t, err)
			pc := b.PrepareCatalog(ctx, storagetest.CatalogDocument(testCatalog(tc.records)), tc.writes)
			taken := pendingTaken(b)
			if len(taken) != 1 {
				t.Fatalf("%d catalogs pending, want 1", len(taken))
			}
			must(t, pc.Close())
			for _, c := range taken {
				c.ready(ctx)
			}
			must(t, b.Sync(ctx))
			if ls, err := b.Leftovers(ctx, time.Now().Add(time.Hour)); err != nil || len(ls) != 0 {
				t.Fatalf("Leftovers = %+v, %v; want none", ls, err)
			}
			if _, err := os.Stat(filepath.Join(b.root, catalog.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("catalog after Close: %v, want none", err)
			}
		})
	}
}

// A pending catalog's commit checks the root first: into a root moved
// away it writes nothing and fails with ErrRootMissing, into one replaced
// with ErrRootChanged, whichever way the catalog is written.
func TestPendingCatalogCommitChecksTheRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		records, writes int
		replace         bool
		is              error
	}{
		{"held whole, moved", 3, 0, false, storage.ErrRootMissing},
		{"held whole, replaced", 3, 0, true, storage.ErrRootChanged},
		{"encoded at the commit, moved", 20, 0, false, storage.ErrRootMissing},
		{"encoded beside the writes, replaced", 20, 100, true, storage.ErrRootChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			root := filepath.Join(t.TempDir(), "root")
			must(t, os.Mkdir(root, 0o755))
			b, err := New(root, WithStreamMinOutputs(8))
			must(t, err)
			pc := b.PrepareCatalog(ctx, storagetest.CatalogDocument(testCatalog(tc.records)), tc.writes)
			defer pc.Close()
			must(t, b.Sync(ctx))
			must(t, os.Rename(root, root+".old"))
			if tc.replace {
				must(t, os.Mkdir(root, 0o755))
			}
			if _, err := pc.Commit(ctx, ""); !errors.Is(err, tc.is) {
				t.Fatalf("Commit = %v, want %v", err, tc.is)
			}
			must(t, pc.Close())
			for _, dir := range []string{root, root + ".old"} {
				if _, err := os.Stat(filepath.Join(dir, catalog.FileName)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: catalog written (%v)", dir, err)
				}
			}
		})
	}
}
