package storagetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// largeCatalog is more records than a catalog a backend may hold whole
// (local: encoded as it is written past 2048).
const largeCatalog = 2100

// catalogFlow is how a publication drives a PendingCatalog: PrepareCatalog
// of a catalog of records records, told that writes objects follow; the
// caller writes objects; a Sync when sync; then Commit or Close. Together
// the flows take every way a backend may write a catalog (local: held
// whole and written by the Sync or by the commit, encoded at the commit,
// or encoded beside the writes and named by the Sync).
//
// writes is a count the backend plans by when PrepareCatalog begins. The
// flow writes all of them in its first step and at most aheadWrites in
// the others, which keeps the suite fast and changes nothing the backend
// can see at PrepareCatalog.
type catalogFlow struct {
	records, writes int
	sync            bool
}

func (f catalogFlow) String() string {
	s := fmt.Sprintf("%dRecords/%dWrites", f.records, f.writes)
	if f.sync {
		return s + "/Sync"
	}
	return s + "/NoSync"
}

var catalogFlows = func() []catalogFlow {
	var fs []catalogFlow

	// 20 records: held whole by default, past a lowered bound (local:
	// WithStreamMinOutputs) as large as largeCatalog.
	for _, records := range []int{20, largeCatalog} {
		for _, writes := range []int{0, 100} {
			for _, sync := range []bool{false, true} {
				fs = append(fs, catalogFlow{records, writes, sync})
			}
		}
	}
	return fs
}()

// runCatalog runs testCatalogFlow for every flow, each on a root of its
// own, in parallel.
func runCatalog(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	for _, f := range catalogFlows {
		t.Run("Catalog/"+f.String(), func(t *testing.T) {
			t.Parallel()
			testCatalogFlow(t, newBackend(t), f)
		})
	}
}

// aheadWrites is how many of the writes announced the flow writes before
// a commit but the first: past local's bound for encoding a catalog
// beside the writes.
const aheadWrites = 12

// prepare begins next's commit as the flow does, up to the Commit: the
// writes (all of them when all, else at most aheadWrites; the same paths
// each time: outputs replaced) and the Sync.
func (f catalogFlow) prepare(t *testing.T, b storage.Backend, next *catalog.Catalog, all bool) storage.PendingCatalog {
	t.Helper()
	pc := b.PrepareCatalog(t.Context(), CatalogDocument(next), f.writes)
	n := f.writes
	if !all {
		n = min(n, aheadWrites)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	jobs := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				p, data := flowWrite(i)
				if _, err := b.Put(t.Context(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{DeferSync: true}); err != nil {
					errs <- fmt.Errorf("put %s: %w", p, err)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		pc.Close()
		t.Fatal(err)
	}
	if f.sync {
		if err := b.Sync(t.Context()); err != nil {
			pc.Close()
			t.Fatalf("Sync: %v", err)
		}
	}
	return pc
}

// flowWrite is the i-th object a flow writes.
func flowWrite(i int) (string, []byte) {
	p := fmt.Sprintf("w/%03d.bin", i)
	return p, []byte("output " + p)
}

// commit runs the flow to Commit at want, then closes (twice: a deferred
// Close after an explicit one is safe).
func (f catalogFlow) commit(t *testing.T, b storage.Backend, next *catalog.Catalog, want storage.Version) (storage.Version, error) {
	t.Helper()
	pc := f.prepare(t, b, next, false)
	v, err := pc.Commit(t.Context(), want)
	closeCatalog(t, pc)
	return v, err
}

func closeCatalog(t *testing.T, pc storage.PendingCatalog) {
	t.Helper()
	if err := pc.Close(); err != nil {
		t.Fatalf("PendingCatalog.Close: %v", err)
	}
	if err := pc.Close(); err != nil {
		t.Fatalf("PendingCatalog.Close again: %v", err)
	}
}

var catalogTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return catalog.Digest(sum[:])
}

// testCatalog is a valid catalog of n records; gen tells catalogs of one
// size apart.
func testCatalog(n, gen int) *catalog.Catalog {
	updated := catalogTime.Add(time.Duration(gen) * time.Second)
	c := &catalog.Catalog{DistributorVersion: "storagetest", CreatedAt: catalogTime, UpdatedAt: updated}
	src := catalog.Source{ID: fmt.Sprintf("bundle-%d", gen), Digest: digestOf(fmt.Sprint("bundle ", gen)), Created: catalogTime}
	c.Outputs = make([]catalog.Output, n)
	for i := range c.Outputs {
		p := fmt.Sprintf("out/%05d.bin", i)
		c.Outputs[i] = catalog.Output{Path: p, PipelineID: "pipeline", DestinationID: "dest", Source: src,
			Kind: catalog.KindSource, SHA256: digestOf(fmt.Sprint(p, gen)), Size: int64(i),
			CreatedAt: catalogTime, UpdatedAt: updated}
	}
	return c
}

// invalidCatalogs are catalogs of n records that do not validate: a
// record without a digest, a record with an invalid path (the last ones:
// an encoder finds them when the rest is written), and a catalog without
// its times.
func invalidCatalogs(n, gen int) map[string]*catalog.Catalog {
	noDigestCat := testCatalog(n, gen)
	noDigestCat.Outputs[n-1].SHA256 = ""
	badPath := testCatalog(n, gen)
	badPath.Outputs[n-1].Path = "zz//bad"
	noTime := testCatalog(n, gen)
	noTime.CreatedAt = time.Time{}
	return map[string]*catalog.Catalog{noDigest: noDigestCat, "a record with an invalid path": badPath, "no created_at": noTime}
}

// noDigest names the invalid catalog whose one bad record is the last.
const noDigest = "a record without a digest"

func marshal(t *testing.T, c *catalog.Catalog) []byte {
	t.Helper()
	data, err := catalog.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wantCatalog checks the root's catalog bytes: c's, or none when c is
// nil. It returns the catalog's version as ReadVersion reads it, which
// need not be the string Commit returned for it (local: a small catalog
// written as it was encoded is stamped, and read by its content) but is
// a version of it all the same: the flow commits at both.
func wantCatalog(t *testing.T, b storage.Backend, c *catalog.Catalog) storage.Version {
	t.Helper()
	got, v, err := b.ReadVersion(t.Context(), catalog.FileName)
	if err != nil {
		t.Fatalf("ReadVersion(%s): %v", catalog.FileName, err)
	}
	if c == nil {
		if got != nil || v != "" {
			t.Fatalf("ReadVersion(%s) = %q, %q; want no catalog", catalog.FileName, abbrev(got), v)
		}
		return ""
	}
	if want := marshal(t, c); !bytes.Equal(got, want) || v == "" {
		t.Fatalf("ReadVersion(%s) = %q, %q; want %q (catalog.Marshal) and a version", catalog.FileName, abbrev(got), v, abbrev(want))
	}
	return v
}

// testCatalogFlow commits catalogs through f: "" creates, a current
// version replaces (Commit's, ReadVersion's, another write's), a stale one
// or "" over a catalog loses, an invalid catalog fails with
// catalog.ErrInvalid; what loses or fails, or is closed uncommitted,
// leaves the catalog byte for byte, and nothing else behind.
func testCatalogFlow(t *testing.T, b storage.Backend, f catalogFlow) {
	n := f.records
	var writes []string
	for i := range f.writes {
		p, _ := flowWrite(i)
		writes = append(writes, p)
	}
	invalid := func(cur *catalog.Catalog, want storage.Version, all bool) {
		t.Helper()
		for what, c := range invalidCatalogs(n, 100) {
			if !all && what != noDigest {
				continue
			}
			if _, err := f.commit(t, b, c, want); !errors.Is(err, catalog.ErrInvalid) {
				t.Fatalf("Commit of a catalog with %s: %v, want catalog.ErrInvalid", what, err)
			}
			wantCatalog(t, b, cur)
		}
	}

	// Closed uncommitted, or invalid, on a fresh root: nothing.
	closeCatalog(t, f.prepare(t, b, testCatalog(n, 0), true))
	wantCatalog(t, b, nil)
	wantPaths(t, b, "", writes...)
	invalid(nil, "", true)

	v1, err := f.commit(t, b, testCatalog(n, 1), "")
	if err != nil || v1 == "" {
		t.Fatalf("Commit on a fresh root = %q, %v; want a version", v1, err)
	}
	rv1 := wantCatalog(t, b, testCatalog(n, 1))
	if _, err := f.commit(t, b, testCatalog(n, 2), ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Commit at \"\" over a catalog: %v, want ErrConflict", err)
	}
	wantCatalog(t, b, testCatalog(n, 1))
	v2, err := f.commit(t, b, testCatalog(n, 2), v1)
	if err != nil || v2 == "" || v2 == v1 {
		t.Fatalf("Commit at the last Commit's version = %q, %v; want a new version (was %q)", v2, err, v1)
	}
	wantCatalog(t, b, testCatalog(n, 2))
	for _, stale := range []storage.Version{v1, rv1} {
		if _, err := f.commit(t, b, testCatalog(n, 3), stale); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("Commit at a stale version: %v, want ErrConflict", err)
		}
		wantCatalog(t, b, testCatalog(n, 2))
	}
	v3, err := b.WriteIfVersion(t.Context(), catalog.FileName, marshal(t, testCatalog(n, 3)), v2)
	if err != nil {
		t.Fatalf("WriteIfVersion at a Commit's version: %v", err)
	}
	if _, err := f.commit(t, b, testCatalog(n, 4), v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Commit at the version before a WriteIfVersion: %v, want ErrConflict", err)
	}
	if _, err := f.commit(t, b, testCatalog(n, 4), v3); err != nil {
		t.Fatalf("Commit at WriteIfVersion's version: %v", err)
	}
	rv4 := wantCatalog(t, b, testCatalog(n, 4))
	v5, err := f.commit(t, b, testCatalog(n, 5), rv4)
	if err != nil {
		t.Fatalf("Commit at ReadVersion's version: %v", err)
	}
	wantCatalog(t, b, testCatalog(n, 5))
	invalid(testCatalog(n, 5), v5, false)
	closeCatalog(t, f.prepare(t, b, testCatalog(n, 6), false))
	wantCatalog(t, b, testCatalog(n, 5))
	if err := b.DeleteIfVersion(t.Context(), catalog.FileName, v5); err != nil {
		t.Fatalf("DeleteIfVersion at a Commit's version: %v", err)
	}
	wantCatalog(t, b, nil)
	if _, err := f.commit(t, b, testCatalog(n, 7), v5); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Commit at the version of a deleted catalog: %v, want ErrConflict", err)
	}
	wantCatalog(t, b, nil)
	if _, err := f.commit(t, b, testCatalog(n, 7), ""); err != nil {
		t.Fatalf("Commit at \"\" after the catalog's delete: %v", err)
	}
	wantCatalog(t, b, testCatalog(n, 7))
	wantOnlyFlowWrites(t, b, f, writes)
}

// wantOnlyFlowWrites checks that b holds f's writes (at paths writes) and
// no leftovers beside the catalog.
func wantOnlyFlowWrites(t *testing.T, b storage.Backend, f catalogFlow, writes []string) {
	t.Helper()
	wantPaths(t, b, "", writes...)
	for i := range f.writes {
		p, data := flowWrite(i)
		wantContent(t, b, p, data)
	}
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("Leftovers = %+v, want none: what was closed or lost is dropped", ls)
	}
}

// Pending catalogs of every size and flow, racing from one version: one
// wins, the others get ErrConflict, and the catalog is the winner's.
func testCatalogRace(t *testing.T, b storage.Backend) {
	flows := []catalogFlow{{3, 0, false}, {3, 100, false}, {largeCatalog, 0, false}, {largeCatalog, 100, false}}
	cur := storage.Version("")
	var curCat *catalog.Catalog
	for round := range 3 {
		pcs := make([]storage.PendingCatalog, len(flows))
		cats := make([]*catalog.Catalog, len(flows))
		for i, f := range flows {
			cats[i] = testCatalog(f.records, 10*round+i)
			pcs[i] = f.prepare(t, b, cats[i], false)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		versions := make([]storage.Version, len(flows))
		errs := make([]error, len(flows))
		for i, pc := range pcs {
			wg.Go(func() {
				<-start
				versions[i], errs[i] = pc.Commit(t.Context(), cur)
			})
		}
		close(start)
		wg.Wait()
		for _, pc := range pcs {
			closeCatalog(t, pc)
		}
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: catalogs %d and %d both committed at %q", round, winner, i, cur)
			case err == nil:
				winner = i
			case !errors.Is(err, storage.ErrConflict):
				t.Fatalf("round %d: catalog %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			wantCatalog(t, b, curCat)
			t.Fatalf("round %d: no catalog committed at %q", round, cur)
		}
		cur, curCat = versions[winner], cats[winner]
		wantCatalog(t, b, curCat)
	}
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("Leftovers = %+v, want none: the losers' bytes are dropped", ls)
	}
}

// CatalogDocument is next as Backend.PrepareCatalog takes it.
func CatalogDocument(next *catalog.Catalog) storage.Document {
	return storage.Document{Path: catalog.FileName, Records: len(next.Outputs), Encode: func(w io.Writer) error { return catalog.MarshalTo(w, next) }}
}
