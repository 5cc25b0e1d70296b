package local

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage/storagetest"
)

// recordsCatalog is a valid catalog of n records.
func recordsCatalog(n int) *catalog.Catalog {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sum := func(s string) string { d := sha256.Sum256([]byte(s)); return catalog.Digest(d[:]) }
	c := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	src := catalog.Source{ID: "bundle", Digest: sum("bundle"), Created: at}
	for i := range n {
		p := fmt.Sprintf("out/%05d.bin", i)
		c.Outputs = append(c.Outputs, catalog.Output{Path: p, PipelineID: "p", DestinationID: "d", Source: src,
			Kind: catalog.KindSource, SHA256: sum(p), Size: int64(i), CreatedAt: at, UpdatedAt: at})
	}
	return c
}

// The catalog's bytes go out before the caller's Sync, which makes them
// durable with the caller's writes: a small catalog written by that Sync,
// a large one (past the stream bound) encoded beside 8 writes or more and
// named by it. The commit then flushes only the folder that names it.
// A large catalog with fewer writes is encoded by the commit itself,
// which flushes the file too.
func TestPendingCatalogFlushedByTheSyncBeforeItsCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		records     int
		writes      int
		wantCommits []string
	}{
		{"small, written at the Sync", 20, 0, []string{"folder ."}},
		{"large, beside the writes", 20, 8, []string{"folder ."}},
		{"large, few writes: at the commit", 20, 7, []string{"file .", "folder ."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			streamMin := 0
			if c.name != "small, written at the Sync" {
				streamMin = 8
			}
			b, l := newSyncLogged(t, WithStreamMinOutputs(streamMin))
			pc := b.PrepareCatalog(ctx, storagetest.CatalogDocument(recordsCatalog(c.records)), c.writes)
			defer pc.Close()
			b.dirty.mark() // writes for the Sync to flush
			must(t, b.Sync(ctx))
			l.take()
			if _, err := pc.Commit(ctx, ""); err != nil {
				t.Fatal(err)
			}
			if got := l.take(); !slices.Equal(got, c.wantCommits) {
				t.Fatalf("the commit flushed %q, want %q", got, c.wantCommits)
			}
			for _, name := range tree(t, b.root) {
				if catalog.IsTempName(name) {
					t.Fatalf("temp file %s left", name)
				}
			}
		})
	}
}
