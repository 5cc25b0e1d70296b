package engine

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
)

// The intent splices the catalog codec's records into its own document:
// whatever it writes reads back as exactly what was recorded.
func TestIntentReadsBackAsWritten(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	rec := func(p string) catalog.Output {
		return catalog.Output{Path: p, PipelineID: "p.x", DestinationID: "site", Kind: catalog.KindSource,
			Source: catalog.Source{ID: "src", Digest: "sha256:" + string(make64('a')), Created: at},
			SHA256: "sha256:" + string(make64('b')), Size: 7, CreatedAt: at, UpdatedAt: at.Add(time.Second)}
	}
	odd := rec(`q"uo]te}/ü x.txt`)
	odd.URL = "https://example.test/q%22uo%5Dte%7D/%C3%BC%20x.txt"
	for _, tc := range []struct {
		name string
		doc  intentDoc
	}{
		{"no writes", intentDoc{EventID: "ev-1", Owner: catalog.Owner{PipelineID: "p.x", DestinationID: "site"}, Deletes: []string{"gone.txt"}}},
		{"writes", intentDoc{EventID: "ev-2", Owner: catalog.Owner{PipelineID: "p.x", DestinationID: "site"},
			Writes: []catalog.Output{rec("a.txt"), odd, rec("z/b.txt")}, Deletes: []string{}, Reported: []string{"r.txt"}}},
		{"maintenance", intentDoc{Writes: []catalog.Output{rec("a.txt")}, Deletes: []string{"]"}}},
		{"writes out of order", intentDoc{EventID: "ev-3", Writes: []catalog.Output{rec("z/b.txt"), rec("a.txt")}, Deletes: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := encodeIntent(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(data) {
				t.Fatalf("intent is not JSON: %s", data)
			}
			got, err := decodeIntent(data)
			if err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			want := tc.doc
			want.Writes = slices.SortedFunc(slices.Values(want.Writes), byPath) // recorded in path order
			if want.Writes == nil {
				want.Writes = []catalog.Output{}
			}
			if got.Writes == nil {
				got.Writes = []catalog.Output{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back\n%+v\nwant\n%+v\nfrom %s", got, want, data)
			}
		})
	}
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}
