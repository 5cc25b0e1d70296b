package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// largeCatalog is a catalog of n records of another owner than the
// publications of publish, under big/.
func largeCatalog(n int) *catalog.Catalog {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	c := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at, Outputs: make([]catalog.Output, n)}
	src := catalog.Source{ID: "bench.big", Digest: fmt.Sprintf("sha256:%064x", 1), Created: at}
	for i := range c.Outputs {
		c.Outputs[i] = catalog.Output{Path: fmt.Sprintf("big/d%02d/f%07d.bin", i%50, i), PipelineID: "bench.big", DestinationID: "site",
			Source: src, Kind: catalog.KindSource, SHA256: fmt.Sprintf("sha256:%064x", i), Size: 0, CreatedAt: at, UpdatedAt: at}
	}
	c.Sort()
	return c
}

// heapAtCommit records the live heap when the next catalog is encoded:
// what a publication holds at its commit.
type heapAtCommit struct {
	storage.Backend
	live uint64
}

func (h *heapAtCommit) PrepareCatalog(ctx context.Context, doc storage.Document, writes int) storage.PendingCatalog {
	encode := doc.Encode
	doc.Encode = func(w io.Writer) error {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.live = ms.HeapAlloc
		return encode(w)
	}
	return h.Backend.PrepareCatalog(ctx, doc, writes)
}

// TestPublicationHoldsNotTheCatalogOfALargeRoot: a publication of two
// outputs to a root of 100,000 records holds, at its commit, a small part
// of the catalog's size (the paths, the records its plan reads), not the
// catalog read or parsed; the catalog it commits is the old one with its
// two records added, the others as they were. Not parallel: it measures
// the heap.
func TestPublicationHoldsNotTheCatalogOfALargeRoot(t *testing.T) {
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := largeCatalog(100_000)
	data, err := catalog.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalog.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	size := len(data)
	data = nil
	old = nil
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	probe := &heapAtCommit{Backend: root}
	res, err := publish(t, probe, planner.Additive, dropFiles, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	grown := int64(probe.live) - int64(before.HeapAlloc)
	t.Logf("held %d KB at the commit; the catalog is %d KB", grown>>10, size>>10)
	if grown > int64(size/8) {
		t.Fatalf("the publication held %d MB at its commit, more than an eighth of the catalog's %d MB", grown>>20, size>>20)
	}
	if len(res.Written) != 2 {
		t.Fatalf("written %v, want the two outputs", itemPaths(res.Written))
	}

	got, err := os.ReadFile(filepath.Join(dir, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := catalog.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	want := largeCatalog(100_000)
	for _, p := range []string{"data/a.csv", "data/b.csv"} {
		rec, ok := next.Lookup(p)
		if !ok {
			t.Fatalf("no record of %s", p)
		}
		want.Outputs = append(want.Outputs, rec)
	}
	want.UpdatedAt, want.DistributorVersion = next.UpdatedAt, next.DistributorVersion
	wantBytes, err := catalog.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("the catalog committed is not the old one with the two records added")
	}
}

// TestPublicationToACatalogInAnotherForm: a catalog written in another
// form (reformatted by hand) is read whole, and the publication commits
// it in the writer's form with its records added.
func TestPublicationToACatalogInAnotherForm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := catalog.Marshal(largeCatalog(30))
	if err != nil {
		t.Fatal(err)
	}
	var tabbed bytes.Buffer
	if err := json.Indent(&tabbed, data, "", "\t"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalog.FileName), tabbed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(t, root, planner.Additive, dropFiles, fixedNow); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := catalog.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := catalog.Marshal(next)
	if err != nil || !bytes.Equal(got, canon) {
		t.Fatalf("the catalog committed is not in the writer's form (%v):\n%s", err, got)
	}
	if len(next.Outputs) != 32 {
		t.Fatalf("%d records, want the 30 and the 2 published", len(next.Outputs))
	}
}

// TestFingerprintShardRewrittenWholeAfterAPartialLoad: a publication
// keeping one output of a large root (its catalog streamed) loads only
// that output's entry of its shard; when it vouches for it again (its
// stored version changed, same bytes) and rewrites the shard, the shard
// keeps every other entry.
func TestFingerprintShardRewrittenWholeAfterAPartialLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i := range 1100 {
		files[fmt.Sprintf("d%d/f%04d.txt", i%5, i)] = fmt.Sprintf("file %d\n", i)
	}
	if _, err := publish(t, root, planner.Additive, files, fixedNow); err != nil {
		t.Fatal(err)
	}
	before := fingerprintEntries(t, dir)
	if len(before) != 1100 {
		t.Fatalf("%d fingerprint entries after the first publication, want 1100", len(before))
	}

	// Another stored version of the same bytes: its entry no longer vouches.
	if err := os.Remove(filepath.Join(dir, "d0", "f0000.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d0", "f0000.txt"), []byte(files["d0/f0000.txt"]), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := runPublication(t, root, heldLease{}, publicationSpec{workflow: planner.Additive, html: true, eventID: "ev-1", streamed: true},
		map[string]string{"d0/f0000.txt": files["d0/f0000.txt"]}, fixedNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 0 {
		t.Fatalf("written %v, want none (same bytes)", itemPaths(res.Written))
	}
	after := fingerprintEntries(t, dir)
	if len(after) != 1100 {
		t.Fatalf("%d fingerprint entries after the second publication, want 1100", len(after))
	}
	if after["d0/f0000.txt"] == before["d0/f0000.txt"] {
		t.Fatalf("the entry of the output vouched for again was not updated")
	}
}

// fingerprintEntries reads every entry of the root's fingerprint index:
// path → "sha256 TAB fingerprint".
func fingerprintEntries(t *testing.T, dir string) map[string]string {
	t.Helper()
	shards, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(engine.FingerprintsDir), "*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, sh := range shards {
		data, err := os.ReadFile(sh)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		for _, l := range lines[2:] { // the header and the sum
			sha, rest, _ := strings.Cut(l, "\t")
			fp, p, _ := strings.Cut(rest, "\t")
			out[p] = sha + "\t" + fp
		}
	}
	return out
}

// TestStatusOfALargeRootHoldsNotItsCatalog: status of a root of 100,000
// records of three owners and four source versions allocates a small
// part of the catalog's size (it sums the records up as they stream by)
// and reports each owner's and source's counts and bytes. Not parallel:
// it measures allocations.
func TestStatusOfALargeRootHoldsNotItsCatalog(t *testing.T) {
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := largeCatalog(100_000)
	for i := range c.Outputs {
		o := &c.Outputs[i]
		o.Size = int64(i % 7)
		switch i % 4 {
		case 1:
			o.PipelineID = "bench.other"
		case 2:
			o.DestinationID = "archive"
		case 3:
			o.Source.ID, o.Source.Created = "bench.big.v2", o.Source.Created.Add(time.Hour)
		}
	}
	data, err := catalog.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalog.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{} // owner or owner+source → outputs, bytes
	for _, o := range c.Outputs {
		for _, k := range []string{o.Owner().String(), o.Owner().String() + " " + o.Source.ID} {
			w := want[k]
			want[k] = [2]int64{w[0] + 1, w[1] + o.Size}
		}
	}
	size := len(data)
	data, c = nil, nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := (&engine.Engine{}).Status(context.Background(), root, engine.StatusOptions{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("status allocated %d KB; the catalog is %d KB", allocated>>10, size>>10)
	if allocated > uint64(size/4) {
		t.Fatalf("status allocated %d MB, more than a quarter of the catalog's %d MB", allocated>>20, size>>20)
	}
	got := map[string][2]int64{}
	for _, o := range st.Owners {
		got[o.Owner.String()] = [2]int64{int64(o.Outputs), o.Bytes}
		for _, s := range o.Sources {
			got[o.Owner.String()+" "+s.Source.ID] = [2]int64{int64(s.Outputs), s.Bytes}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || st.Outputs != 100_000 {
		t.Fatalf("status owners %v (%d outputs), want %v", got, st.Outputs, want)
	}
}
