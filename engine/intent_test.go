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
		{"version", intentDoc{EventID: "ev-4", Owner: catalog.Owner{PipelineID: "p.x", DestinationID: "site"},
			Writes: []catalog.Output{rec("a.txt")}, Deletes: []string{}, Source: rec("a.txt").Source, AllowOlder: true}},
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

// A record of a newer version of the intent's source, for the intent's
// owner, is never replaced by its roll forward (unless it rolls back).
func TestSupersedes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	owner := catalog.Owner{PipelineID: "p.x", DestinationID: "site"}
	v1 := catalog.Source{ID: "src", Digest: "sha256:1", Created: at}
	v2 := catalog.Source{ID: "src", Digest: "sha256:2", Created: at.Add(time.Minute)}
	rec := func(o catalog.Owner, v catalog.Source) catalog.Output {
		return catalog.Output{Path: "a.txt", PipelineID: o.PipelineID, DestinationID: o.DestinationID, Source: v}
	}
	other := catalog.Owner{PipelineID: "p.y", DestinationID: "site"}
	for _, tc := range []struct {
		name string
		old  catalog.Output
		doc  intentDoc
		v    catalog.Source
		want bool
	}{
		{"newer version of the source", rec(owner, v2), intentDoc{Owner: owner}, v1, true},
		{"equal created, greater digest", rec(owner, catalog.Source{ID: "src", Digest: "sha256:9", Created: at}), intentDoc{Owner: owner}, v1, true},
		{"the same version", rec(owner, v1), intentDoc{Owner: owner}, v1, false},
		{"an older version", rec(owner, v1), intentDoc{Owner: owner}, v2, false},
		{"a roll back", rec(owner, v2), intentDoc{Owner: owner, AllowOlder: true}, v1, false},
		{"another owner", rec(other, v2), intentDoc{Owner: owner}, v1, false},
		{"another source", rec(owner, catalog.Source{ID: "other", Digest: "sha256:2", Created: at.Add(time.Minute)}), intentDoc{Owner: owner}, v1, false},
		{"maintenance (no version)", rec(owner, v2), intentDoc{}, catalog.Source{}, false},
	} {
		if got := supersedes(tc.old, tc.doc, tc.v); got != tc.want {
			t.Errorf("%s: supersedes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
