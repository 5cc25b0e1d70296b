package catalog_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/distributor/distributor/catalog"
)

// Ascending answers exactly as Lookup does for paths asked in ascending
// order (present, missing, past gaps longer than its steps) and for paths
// asked out of order afterwards, on sorted and unsorted records.
func TestAscendingAnswersAsLookup(t *testing.T) {
	var outs []catalog.Output
	for i := range 100 {
		if i%10 < 3 || i == 55 {
			continue // gaps of three, and one of one
		}
		outs = append(outs, catalog.Output{Path: fmt.Sprintf("d%d/f%03d", i%4, i), Size: int64(i)})
	}
	sorted := &catalog.Catalog{Outputs: slices.Clone(outs)}
	sorted.Sort()
	var asks []string
	for i := range 110 {
		if i%3 != 1 { // every third path skipped: gaps in the asks too
			asks = append(asks, fmt.Sprintf("d%d/f%03d", i%4, i))
		}
	}
	slices.Sort(asks)
	asks = append(asks, "a", "d2/f002", "d3/f099", "zz", "d0/f000") // out of order
	unsorted := &catalog.Catalog{Outputs: slices.Clone(sorted.Outputs)}
	slices.Reverse(unsorted.Outputs)
	for name, c := range map[string]*catalog.Catalog{"sorted": sorted, "unsorted": unsorted} {
		find := c.Ascending()
		for _, p := range asks {
			got, gotOK := find(p)
			want, wantOK := sorted.Lookup(p)
			if gotOK != wantOK || got.Path != want.Path || got.Size != want.Size {
				t.Fatalf("%s: %q: got %q %v, want %q %v", name, p, got.Path, gotOK, want.Path, wantOK)
			}
		}
	}
}
