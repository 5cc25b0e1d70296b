package catalog_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// TestMarshalOfOwnedCatalogMatchesReference: a catalog read by ParseOwned
// (from Marshal's form, a compact form, or with some times written in
// another form), then edited through Successor or in place, is written
// exactly as the encoding/json writer writes the edited catalog: bytes
// copied from the input only where a record still holds what was read and
// was written canonically.
func TestMarshalOfOwnedCatalogMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		switch rapid.IntRange(0, 2).Draw(t, "layout") {
		case 1:
			var compact bytes.Buffer
			if err := json.Compact(&compact, data); err != nil {
				t.Fatal(err)
			}
			data = compact.Bytes()
		case 2: // same instants, not the form Marshal writes
			data = bytes.Replace(data, []byte(`Z"`), []byte(`+00:00"`), rapid.IntRange(-1, 20).Draw(t, "offset-times"))
		}
		cat, legacy, err := catalog.ParseOwned(data)
		if err != nil || legacy {
			t.Fatalf("ParseOwned: legacy %v, %v\n%s", legacy, err, data)
		}
		next := cat.Successor()
		for i, o := range cat.Outputs {
			switch rapid.IntRange(0, 9).Draw(t, "edit") { // 6-9: kept as read
			case 0: // dropped
				continue
			case 1:
				o.Size ^= 1
			case 2:
				o.UpdatedAt = o.UpdatedAt.Add(1)
			case 3:
				o.URL = idGen.Draw(t, "url")
			case 4: // edited in place in the parsed catalog too
				cat.Outputs[i].SHA256 = digestGen.Draw(t, "sha256")
				o = cat.Outputs[i]
			case 5: // the same values in other strings: encoded again
				o.PipelineID, o.Path = strings.Clone(o.PipelineID), strings.Clone(o.Path)
			}
			next.Outputs = append(next.Outputs, o)
		}
		for _, cc := range []*catalog.Catalog{cat, next} {
			want, err := catalog.MarshalReference(cc)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, err := catalog.Marshal(cc)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Marshal differs from the reference:\n got %s\nwant %s\ninput %s", got, want, data)
			}
			var streamed bytes.Buffer
			if err := catalog.MarshalTo(&streamed, cc); err != nil || !bytes.Equal(streamed.Bytes(), want) {
				t.Fatalf("MarshalTo = %v, differs from the reference:\n got %s\nwant %s", err, streamed.Bytes(), want)
			}
		}
	})
}

// TestMarshalRewritesRecordsReadInAnotherForm: a record read with times
// written with an offset (valid, not Marshal's form) is written in
// Marshal's form, not copied.
func TestMarshalRewritesRecordsReadInAnotherForm(t *testing.T) {
	t.Parallel()
	want, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	cat, _, err := catalog.ParseOwned(bytes.ReplaceAll(want, []byte(`Z"`), []byte(`+00:00"`)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := catalog.Marshal(cat)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = %v\n%s\nwant\n%s", err, got, want)
	}
}

// TestParseOwnedReadsAsParse: the owned reader returns the records Parse
// returns, for every input the fuzz seeds and the invalid cases hold.
func TestParseOwnedReadsAsParse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		data, err := catalog.Marshal(catalogGen.Draw(t, "catalog"))
		if err != nil {
			t.Fatal(err)
		}
		assertOwnedAsParse(t, data)
	})
	for _, tc := range invalidCases() {
		doc := seedDoc(t)
		tc.mutate(doc)
		assertOwnedAsParse(t, encode(t, doc))
	}
}

// TestParseRefusesBadValuesInMarshalsLayout: records in the exact layout
// Marshal writes take the template scan; a bad value in one is refused as
// the reference reader refuses it, owned or not.
func TestParseRefusesBadValuesInMarshalsLayout(t *testing.T) {
	t.Parallel()
	good, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{`"size": `, `"size": -`, "size must not be negative"},
		{`"sha256": "sha256:`, `"sha256": "sha256:A`, "sha256 must be"},
		{`"path": "`, `"path": "../`, "outputs[0]"},
		{`"kind": "`, `"kind": "x`, "kind must be"},
		{`"created_at": "2`, `"created_at": "X2`, "not an RFC3339 time"},
		{`"pipeline_id": "`, `"pipeline_id": " `, ""}, // valid, escaped when written
	} {
		data := bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1)
		if bytes.Equal(data, good) {
			t.Fatalf("%q is not in the written catalog", tc.old)
		}
		for _, parse := range []func([]byte) (*catalog.Catalog, bool, error){catalog.Parse, catalog.ParseOwned} {
			_, _, err := parse(data)
			_, _, ref := catalog.ParseReference(data)
			if errString(err) != errString(ref) || tc.want != "" && !strings.Contains(errString(err), tc.want) {
				t.Errorf("%s: err %v, reference %v, want %q", tc.new, err, ref, tc.want)
			}
		}
	}
}

func assertOwnedAsParse(t tester, data []byte) {
	want, wl, werr := catalog.Parse(bytes.Clone(data))
	got, gl, gerr := catalog.ParseOwned(bytes.Clone(data))
	if errString(gerr) != errString(werr) || gl != wl || (got == nil) != (want == nil) {
		t.Fatalf("ParseOwned = %v, %v; Parse = %v, %v", gl, gerr, wl, werr)
	}
	if got != nil {
		assertSameCatalog(t, got, want)
	}
}

// TestInOrder: records as ParseOwned read them are in order; another
// slice of them is checked, in order or not.
func TestInOrder(t *testing.T) {
	t.Parallel()
	data, err := catalog.Marshal(benchCat(50))
	if err != nil {
		t.Fatal(err)
	}
	cat, _, err := catalog.ParseOwned(data)
	if err != nil || !cat.InOrder() {
		t.Fatalf("ParseOwned: InOrder false (%v), want true", err)
	}
	next := cat.Successor()
	next.Outputs = slices.Clone(cat.Outputs)
	slices.Reverse(next.Outputs)
	if next.InOrder() {
		t.Fatal("reversed records: InOrder true, want false")
	}
	slices.Reverse(next.Outputs)
	if !next.InOrder() {
		t.Fatal("a copy of the records in order: InOrder false, want true")
	}
}
