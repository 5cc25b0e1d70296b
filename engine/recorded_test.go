package engine

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// TestNextCatalogWalksWhatItHas: the catalog a publication commits, as
// recorded, walks in path order exactly the paths it has: those of the
// catalog read that the plan did not read, and the plan's records.
func TestNextCatalogWalksWhatItHas(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		rec := func(p, pipeline string) catalog.Output {
			return catalog.Output{Path: p, PipelineID: pipeline, DestinationID: "site",
				Source: catalog.Source{ID: "s", Digest: fmt.Sprintf("sha256:%064x", 1), Created: at},
				Kind:   catalog.KindSource, SHA256: fmt.Sprintf("sha256:%064x", 2), CreatedAt: at, UpdatedAt: at}
		}
		name := rapid.StringMatching(`[a-e]{1,3}`)
		old := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
		for _, p := range rapid.SliceOfDistinct(name, func(s string) string { return s }).Draw(t, "old") {
			old.Outputs = append(old.Outputs, rec("old/"+p, rapid.SampledFrom([]string{"mine", "other"}).Draw(t, "owner")))
		}
		old.Sort()
		data, err := catalog.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		sel := planner.Select(catalog.Owner{PipelineID: "mine", DestinationID: "site"}, nil)
		st, err := scanSelected(bytes.NewReader(data), sel, int64(len(data)), false)
		if err != nil {
			t.Fatal(err)
		}
		next := old.Successor()
		for _, o := range st.cat.Outputs { // the plan keeps some of what it read
			if rapid.Bool().Draw(t, "kept") {
				next.Outputs = append(next.Outputs, o)
			}
		}
		for _, p := range rapid.SliceOfDistinct(name, func(s string) string { return s }).Draw(t, "new") {
			next.Outputs = append(next.Outputs, rec("new/"+p, "mine"))
		}
		next.Sort() // as a plan's Next is
		cat := st.recordedAfter(next)
		var walked []string
		cat.walk(func(p string) { walked = append(walked, p) })
		var want []string
		for _, o := range old.Outputs {
			if cat.has(o.Path) {
				want = append(want, o.Path)
			}
		}
		for _, o := range next.Outputs {
			if cat.has(o.Path) && !slices.Contains(want, o.Path) {
				want = append(want, o.Path)
			}
		}
		slices.Sort(want)
		if !slices.Equal(walked, want) || cat.count() != len(want) {
			t.Fatalf("walked %q (count %d), want %q", walked, cat.count(), want)
		}
	})
}
