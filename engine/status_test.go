package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// Status sums a root's catalog up per owner and source version (newest
// first; two versions side by side in an additive root), names the lock
// object's holder, and changes nothing.
func TestStatusSumsUpOwnersAndVersions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		root, d := newRoot(t)
		e := &engine.Engine{Version: "test"}
		st, err := e.Status(ctx, root, engine.StatusOptions{Leftovers: true})
		if err != nil || st.Catalog || st.Owners != nil || st.Lock != nil || st.PendingRecovery || st.Leftovers == nil || st.Leftovers.Count != 0 {
			t.Fatalf("empty root: %+v, %v", st, err)
		}

		at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
		src := func(n int) catalog.Source {
			return catalog.Source{ID: "w.today", Digest: fmt.Sprintf("sha256:%064x", n), Created: at.Add(time.Duration(n) * time.Hour)}
		}
		rec := func(path, pipeline, dest string, s catalog.Source, size int64, updated time.Duration) catalog.Output {
			return catalog.Output{Path: path, PipelineID: pipeline, DestinationID: dest, Source: s, Kind: catalog.KindSource,
				SHA256: "sha256:" + strings.Repeat("a", 64), Size: size, CreatedAt: at, UpdatedAt: at.Add(updated)}
		}
		cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at.Add(time.Hour), Outputs: []catalog.Output{
			rec("a.txt", "p.a", "site", src(2), 10, time.Minute),
			rec("b.txt", "p.a", "site", src(1), 20, 0),
			rec("c.txt", "p.a", "site", src(2), 30, 2*time.Minute),
			rec("d.txt", "p.b", "site", src(1), 40, 0),
			rec("e.txt", "p.a", "mirror", src(1), 50, 0),
		}}
		data, err := catalog.Marshal(cat)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.WriteIfVersion(ctx, catalog.FileName, data, ""); err != nil {
			t.Fatal(err)
		}
		l, err := lease.NewStorageLocker("apply test", time.Minute).Acquire(ctx, lease.Root{Key: d.RootKey(), Store: root})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		before := snapshotRoot(t, root)

		st, err = e.Status(ctx, root, engine.StatusOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range st.Owners {
			line := fmt.Sprintf("%s %d %d:", o.Owner, o.Outputs, o.Bytes)
			for _, s := range o.Sources {
				line += fmt.Sprintf(" %s %d %d %s", s.Source.Digest[len(s.Source.Digest)-1:], s.Outputs, s.Bytes, s.UpdatedAt.Sub(at))
			}
			got = append(got, line)
		}
		want := []string{"p.a/mirror 1 50: 1 1 50 0s", "p.a/site 3 60: 2 2 40 2m0s 1 1 20 0s", "p.b/site 1 40: 1 1 40 0s"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("owners\n got %q\nwant %q", got, want)
		}
		if !st.Catalog || st.Legacy || st.Outputs != 5 || st.Bytes != 150 || !st.UpdatedAt.Equal(at.Add(time.Hour)) || st.Leftovers != nil ||
			st.Lock == nil || st.Lock.Holder != "apply test" || st.Lock.Stale {
			t.Errorf("status %+v, lock %+v", st, st.Lock)
		}
		if after := snapshotRoot(t, root); after != before {
			t.Errorf("status changed the root:\n%s\nwas\n%s", after, before)
		}
	})
}

// snapshotRoot lists a root's objects with their sizes and fingerprints.
func snapshotRoot(t *testing.T, root storage.Backend) string {
	t.Helper()
	var b strings.Builder
	if err := root.List(context.Background(), "", func(o storage.ObjectInfo) error {
		fmt.Fprintf(&b, "%s %d %v\n", o.Path, o.Size, o.Fingerprint)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// countingRoot counts the reads of the catalog.
type countingRoot struct {
	storage.Backend
	reads atomic.Int32
}

func (c *countingRoot) hookReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == catalog.FileName {
		c.reads.Add(1)
	}
	return c.Backend.ReadVersion(ctx, p, opts...)
}

func (c *countingRoot) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if p == catalog.FileName {
		c.reads.Add(1)
	}
	return c.Backend.Open(ctx, p, opts...)
}

// statusCatalog writes a catalog of n records of one owner into root,
// replacing the one at version v ("" for none), and returns its version.
func statusCatalog(t testing.TB, root storage.Backend, n int, v storage.Version) storage.Version {
	t.Helper()
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	src := catalog.Source{ID: "w.today", Digest: "sha256:" + strings.Repeat("b", 64), Created: at}
	cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at, Outputs: make([]catalog.Output, 0, n)}
	for i := range n {
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: fmt.Sprintf("d%03d/f%07d.txt", i%500, i), PipelineID: "p.a", DestinationID: "site",
			Source: src, Kind: catalog.KindSource, SHA256: "sha256:" + strings.Repeat("a", 64), Size: 10, CreatedAt: at, UpdatedAt: at})
	}
	sort.Slice(cat.Outputs, func(i, j int) bool { return cat.Outputs[i].Path < cat.Outputs[j].Path })
	data, err := catalog.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := root.WriteIfVersion(context.Background(), catalog.FileName, data, v)
	if err != nil {
		t.Fatal(err)
	}
	return nv
}

// With CatalogSummaries, Status reads a root's catalog again only when
// the catalog changed (its fingerprint), and reports what it holds now;
// a catalog changed within the last seconds is read every time.
func TestStatusReadsCatalogOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		plain, _ := newRoot(t)
		root := &countingRoot{Backend: plain}
		later := &engine.Engine{Version: "test", Now: func() time.Time { return time.Now().Add(time.Minute) }}
		opts := engine.StatusOptions{Catalogs: &engine.CatalogSummaries{}}
		status := func(e *engine.Engine, wantOutputs int, wantReads int32) {
			t.Helper()
			st, err := e.Status(ctx, root, opts)
			if err != nil || st.Outputs != wantOutputs || st.Catalog != (wantOutputs > 0) {
				t.Fatalf("status = %d outputs (catalog %v), %v; want %d", st.Outputs, st.Catalog, err, wantOutputs)
			}
			if got := root.reads.Load(); got != wantReads {
				t.Fatalf("%d catalog reads, want %d", got, wantReads)
			}
		}
		status(later, 0, 1)
		v := statusCatalog(t, plain, 3, "")
		status(later, 3, 2)
		status(later, 3, 2)
		status(later, 3, 2)

		v = statusCatalog(t, plain, 5, v)
		status(later, 5, 3)
		status(later, 5, 3)

		// Just written, on the real clock: not kept.
		statusCatalog(t, plain, 7, v)
		now := &engine.Engine{Version: "test"}
		status(now, 7, 4)
		status(now, 7, 5)
		status(later, 7, 6)
		status(later, 7, 6)

		if err := plain.Delete(ctx, catalog.FileName); err != nil {
			t.Fatal(err)
		}
		status(later, 0, 7)
	})
}

// Status counts the leftovers younger than LeftoverAge apart (they may
// be writes in flight) rather than calling the root free of them.
func TestStatusCountsYoungLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	plantTemp(t, dir, "data/"+catalog.TempPrefix+"OLD", time.Now().Add(-engine.DefaultLeftoverAge-time.Minute))
	plantTemp(t, dir, "data/"+catalog.TempPrefix+"YOUNG1", time.Now().Add(-time.Minute))
	plantTemp(t, dir, catalog.TempPrefix+"YOUNG2", time.Now())
	st, err := (&engine.Engine{}).Status(t.Context(), root, engine.StatusOptions{Leftovers: true})
	if err != nil {
		t.Fatal(err)
	}
	lo := st.Leftovers
	if lo == nil || lo.Count != 1 || lo.Recent != 2 || lo.Bytes != 100 || !slices.Equal(lo.Paths, []string{"data/" + catalog.TempPrefix + "OLD"}) {
		t.Fatalf("leftovers %+v, want 1 old (100 bytes) and 2 recent", lo)
	}
}

// BenchmarkStatusLargeCatalog: the status of a root whose catalog holds
// 200,000 records, read every time and with CatalogSummaries (unchanged,
// after a first status that read it).
func BenchmarkStatusLargeCatalog(b *testing.B) {
	ctx := context.Background()
	root, err := local.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	statusCatalog(b, root, 200_000, "")
	e := &engine.Engine{Now: func() time.Time { return time.Now().Add(time.Minute) }}
	for _, bc := range []struct {
		name string
		opts engine.StatusOptions
	}{
		{"every-read", engine.StatusOptions{}},
		{"summaries", engine.StatusOptions{Catalogs: &engine.CatalogSummaries{}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := e.Status(ctx, root, bc.opts); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				st, err := e.Status(ctx, root, bc.opts)
				if err != nil || st.Outputs != 200_000 {
					b.Fatalf("%d outputs, %v", st.Outputs, err)
				}
			}
		})
	}
}

// Dispatch of the contract's calls to the hooks above.

func (c *countingRoot) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {

	return c.hookReadVersion(ctx, p, opts...)
}
