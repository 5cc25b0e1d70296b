package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// wholeCatalogSummary is how status summed a catalog up when it read it
// whole: the reference the streamed summary must agree with.
func wholeCatalogSummary(ctx context.Context, st state, err error) (catalogSummary, error) {
	if err != nil {
		return catalogSummary{}, err
	}
	sum := catalogSummary{present: st.version != "", legacy: st.legacy}
	if st.cat == nil {
		return sum, nil
	}
	sum.updatedAt = st.cat.UpdatedAt
	type agg struct {
		status  OwnerStatus
		sources map[sourceKey]*SourceStatus
	}
	owners := map[catalog.Owner]*agg{}
	for _, o := range st.cat.Outputs {
		a := owners[o.Owner()]
		if a == nil {
			a = &agg{status: OwnerStatus{Owner: o.Owner()}, sources: map[sourceKey]*SourceStatus{}}
			owners[o.Owner()] = a
		}
		key := sourceKey{o.Source.ID, o.Source.Digest, o.Source.Created.UnixNano()}
		s := a.sources[key]
		if s == nil {
			s = &SourceStatus{Source: o.Source}
			a.sources[key] = s
		}
		s.Outputs++
		s.Bytes += o.Size
		if o.UpdatedAt.After(s.UpdatedAt) {
			s.UpdatedAt = o.UpdatedAt
		}
		a.status.Outputs++
		a.status.Bytes += o.Size
		sum.outputs++
		sum.bytes += o.Size
	}
	sum.owners = []OwnerStatus{}
	for _, a := range owners {
		for _, s := range a.sources {
			a.status.Sources = append(a.status.Sources, *s)
		}
		sort.Slice(a.status.Sources, func(i, j int) bool {
			x, y := a.status.Sources[i].Source, a.status.Sources[j].Source
			if !x.Created.Equal(y.Created) {
				return x.Created.After(y.Created)
			}
			if x.ID != y.ID {
				return x.ID < y.ID
			}
			return x.Digest > y.Digest
		})
		sum.owners = append(sum.owners, a.status)
	}
	sort.Slice(sum.owners, func(i, j int) bool {
		x, y := sum.owners[i].Owner, sum.owners[j].Owner
		if x.PipelineID != y.PipelineID {
			return x.PipelineID < y.PipelineID
		}
		return x.DestinationID < y.DestinationID
	})
	return sum, nil
}

// randomCatalogDoc is a catalog of a few owners and source versions in
// random proportions, as Marshal writes it or (sometimes) in another
// form, legacy state, or invalid: the documents status and verify meet.
// tallied is the document whose whole reading status agrees with: doc
// itself, or, when doc is invalid only in a value status does not read
// (catalog.ScanTally), doc before that damage.
func randomCatalogDoc(t *testing.T, rng *rand.Rand) (doc, tallied []byte) {
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	switch rng.IntN(12) {
	case 0:
		doc = []byte(`{"schema_version": 3, "outputs": {}}`)
		return doc, doc
	case 1:
		doc = []byte(`{"schema_version": 4, "outputs": [`)
		return doc, doc
	}
	cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at.Add(time.Duration(rng.IntN(1000)) * time.Second)}
	owners, sources := 1+rng.IntN(4), 1+rng.IntN(5)
	n := rng.IntN(300)
	seen := map[string]bool{}
	for range n {
		p := fmt.Sprintf("d%d/f%04d.txt", rng.IntN(5), rng.IntN(5000))
		if seen[p] {
			continue
		}
		seen[p] = true
		s := rng.IntN(sources)
		src := catalog.Source{ID: fmt.Sprintf("w.s%d", s%3), Digest: fmt.Sprintf("sha256:%064x", s), Created: at.Add(time.Duration(s%4) * time.Hour)}
		ow := rng.IntN(owners)
		name := "p.\u00e9" // an escaped form now and then
		if rng.IntN(3) > 0 {
			name = fmt.Sprintf("p.%d", ow)
		}
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: p, PipelineID: name, DestinationID: fmt.Sprintf("site%d", ow%2),
			Source: src, Kind: catalog.KindSource, SHA256: fmt.Sprintf("sha256:%064x", rng.Uint64()), Size: rng.Int64N(1 << 40),
			CreatedAt: at, UpdatedAt: at.Add(time.Duration(rng.IntN(100000)) * time.Millisecond)})
	}
	cat.Sort()
	data, err := catalog.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Outputs) == 0 {
		return data, data
	}
	bad := cat.Outputs[len(cat.Outputs)/2]
	switch rng.IntN(7) {
	case 0: // another form: Parse reads it, Scan does not
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		data, _ = json.Marshal(v)
	case 1: // a record's sha256 invalid: status does not read it
		return bytes.Replace(data, []byte(bad.SHA256), []byte("sha256:nothex"), 1), data
	case 2: // a record's source digest invalid: status reads it
		data = bytes.Replace(data, []byte(`"digest": "`+bad.Source.Digest), []byte(`"digest": "sha256:nothex`), 1)
	}
	return data, data
}

// The streamed status summary and verify selection give the answers the
// whole catalog gave, on random catalogs: in Marshal's form, in another
// form, legacy, invalid, and absent. Status does not check the values it
// does not read: a catalog invalid only in those is summed up.
func TestStreamedCatalogAgreesWithTheWholeOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 35))
	for i := range 200 {
		root, err := local.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		tallied, err := local.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			doc, talliedDoc := randomCatalogDoc(t, rng)
			if _, err := root.WriteIfVersion(ctx, catalog.FileName, doc, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := tallied.WriteIfVersion(ctx, catalog.FileName, talliedDoc, ""); err != nil {
				t.Fatal(err)
			}
		}
		st, stErr := readState(ctx, tallied)
		want, wantErr := wholeCatalogSummary(ctx, st, stErr)
		got, err := readCatalogSummary(ctx, root)
		if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(fmt.Sprint(got), fmt.Sprint(want)) {
			t.Fatalf("catalog %d: summary\n%+v, %v\nwant\n%+v, %v", i, got, err, want, wantErr)
		}

		owner := catalog.Owner{PipelineID: fmt.Sprintf("p.%d", rng.IntN(4)), DestinationID: fmt.Sprintf("site%d", rng.IntN(2))}
		match := func(o catalog.Output) bool { return o.Owner() == owner }
		mark, err := catalogMark(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		st, stErr = readState(ctx, root)
		sel, err := verifySelection(ctx, root, mark, match)
		wantSel, wantSelErr := wholeSelection(root, st, stErr, match)
		if (err != nil) != (wantSelErr != nil) || wantSelErr != nil && !strings.Contains(err.Error(), wantSelErr.Error()) ||
			!reflect.DeepEqual(fmt.Sprint(sel), fmt.Sprint(wantSel)) {
			t.Fatalf("catalog %d: selection of %v\n%v, %v\nwant\n%v, %v", i, owner, sel, err, wantSel, wantSelErr)
		}
	}
}

// wholeSelection is what verify checked when it read the catalog whole.
func wholeSelection(root interface{ String() string }, st state, err error, match func(catalog.Output) bool) ([]catalog.Output, error) {
	if err != nil {
		return nil, err
	}
	if st.legacy {
		return nil, fmt.Errorf("%s: %w", root, ErrLegacyCatalog)
	}
	var out []catalog.Output
	if st.cat != nil {
		for _, o := range st.cat.Outputs {
			if match(o) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// A catalog whose last record is in another form is read whole after
// its first records were streamed: status and verify count each record
// once.
func TestStreamedReadRestartsOnAnotherForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	for i := range 3 {
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: fmt.Sprintf("f%d", i), PipelineID: "p", DestinationID: "d",
			Source: catalog.Source{ID: "s", Digest: "sha256:" + strings.Repeat("a", 64), Created: at}, Kind: catalog.KindSource,
			SHA256: "sha256:" + strings.Repeat("b", 64), Size: 1, CreatedAt: at, UpdatedAt: at})
	}
	data, err := catalog.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	// The last record in another form (a space more): two were given.
	k := bytes.LastIndex(data, []byte(`"size": 1`))
	data = append(data[:k:k], append([]byte(`"size":  1`), data[k+len(`"size": 1`):]...)...)
	if _, err := root.WriteIfVersion(ctx, catalog.FileName, data, ""); err != nil {
		t.Fatal(err)
	}
	sum, err := readCatalogSummary(ctx, root)
	if err != nil || sum.outputs != 3 || len(sum.owners) != 1 || sum.owners[0].Outputs != 3 {
		t.Fatalf("summary %+v, %v; want 3 outputs of one owner", sum, err)
	}
	mark, err := catalogMark(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := verifySelection(ctx, root, mark, func(catalog.Output) bool { return true })
	if err != nil || len(sel) != 3 {
		t.Fatalf("verify selects %d records, %v; want 3", len(sel), err)
	}
	if _, err := catalog.Scan(bytes.NewReader(data), int64(len(data)), func(*catalog.Record) error { return nil }); !errors.Is(err, catalog.ErrNotStreamed) {
		t.Fatal("the document is streamed; the test needs one that is not")
	}
}

// noFingerprint is a root whose backend cannot tell a fingerprint.
type noFingerprint struct{ storage.Backend }

func (r noFingerprint) Stat(ctx context.Context, p string) (storage.ObjectInfo, error) {
	fi, err := r.Backend.Stat(ctx, p)
	fi.Fingerprint = ""
	return fi, err
}

// Where the backend tells no fingerprint, a catalog's mark is its
// content's: the same catalog marks the same, a replaced one otherwise,
// none marks "".
func TestCatalogMarkWithoutFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := noFingerprint{plain}
	mark := func() storage.Version {
		t.Helper()
		m, err := catalogMark(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := mark(); m != "" {
		t.Fatalf("no catalog marks %q", m)
	}
	v, err := plain.WriteIfVersion(ctx, catalog.FileName, []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	first := mark()
	if first == "" || mark() != first {
		t.Fatalf("one catalog marks %q, then %q", first, mark())
	}
	if _, err := plain.WriteIfVersion(ctx, catalog.FileName, []byte("two"), v); err != nil {
		t.Fatal(err)
	}
	if mark() == first {
		t.Fatal("a replaced catalog marks as the one before")
	}
}
