package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/storage/local"
)

// Status and a verify of one small pipeline allocate as much for a
// catalog of 200,000 records as for one of 20,000: they hold owner sums
// and the selected records, never the catalog (half a gigabyte at a
// million records). Not parallel: it reads the process's allocation
// counter.
func TestStatusAndVerifyMemoryDoesNotGrowWithTheCatalog(t *testing.T) {
	ctx := context.Background()
	e := &engine.Engine{Version: "test"}
	small := catalog.Owner{PipelineID: "p.small", DestinationID: "site"}
	allocs := func(n int) (status, verify uint64) {
		dir := t.TempDir()
		root, err := local.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		bigCatalogWithSmallOwner(t, root, n, small)
		status = allocated(func() {
			st, err := e.Status(ctx, root, engine.StatusOptions{})
			if err != nil || st.Outputs != n+10 || len(st.Owners) != 2 {
				t.Fatalf("status: %d outputs of %d owners, %v; want %d of 2", st.Outputs, len(st.Owners), err, n+10)
			}
		})
		verify = allocated(func() {
			rep, err := e.Verify(ctx, root, func(o catalog.Output) bool { return o.Owner() == small })
			if err != nil || rep.Checked != 10 || !rep.OK() {
				t.Fatalf("verify: %+v, %v; want 10 checked, none damaged", rep, err)
			}
		})
		return status, verify
	}
	s20, v20 := allocs(20_000)
	s200, v200 := allocs(200_000)
	t.Logf("status allocates %d bytes at 20,000 records, %d at 200,000; verify %d, %d", s20, s200, v20, v200)
	const slack = 4 << 20 // buffers, and what the runtime allocates meanwhile
	if s200 > s20+slack || v200 > v20+slack {
		t.Fatalf("200,000 records: status allocates %d bytes, verify %d; at 20,000: %d and %d", s200, v200, s20, v20)
	}
}

// allocated is how many bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bigCatalogWithSmallOwner writes into root a catalog of n records of
// p.big (no files) and ten of small, whose files it writes too.
func bigCatalogWithSmallOwner(t *testing.T, root *local.Backend, n int, small catalog.Owner) {
	ctx := context.Background()
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	src := catalog.Source{ID: "w.today", Digest: "sha256:" + strings.Repeat("b", 64), Created: at}
	cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at, Outputs: make([]catalog.Output, 0, n+10)}
	for i := range n {
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: fmt.Sprintf("big/d%03d/f%07d.txt", i%500, i), PipelineID: "p.big", DestinationID: "site",
			Source: src, Kind: catalog.KindSource, SHA256: "sha256:" + strings.Repeat("a", 64), Size: 10, CreatedAt: at, UpdatedAt: at})
	}
	for i := range 10 {
		p, body := fmt.Sprintf("small/f%d.txt", i), []byte(fmt.Sprintf("small %d\n", i))
		if _, err := root.WriteIfVersion(ctx, p, body, ""); err != nil {
			t.Fatal(err)
		}
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: p, PipelineID: small.PipelineID, DestinationID: small.DestinationID,
			Source: src, Kind: catalog.KindSource, SHA256: digestOf(body), Size: int64(len(body)), CreatedAt: at, UpdatedAt: at})
	}
	cat.Sort()
	data, err := catalog.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.WriteIfVersion(ctx, catalog.FileName, data, ""); err != nil {
		t.Fatal(err)
	}
}
