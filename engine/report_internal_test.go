package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/distributor/distributor/planner"
)

// TestUpdatedRecordsOfOneRunAreReportedWithoutACopy: when the records a
// plan updates without a write are one run of its items (a republish of
// unchanged bytes), the report is that run, allocated once by the plan;
// a report of items spread out is a copy of exactly those.
func TestUpdatedRecordsOfOneRunAreReportedWithoutACopy(t *testing.T) { // not parallel: it counts allocations
	items := func(n int, written func(i int) bool) []planner.Item {
		out := make([]planner.Item, n)
		for i := range out {
			out[i] = planner.Item{Path: fmt.Sprintf("d/f%04d", i), Action: planner.Update, Write: written(i)}
		}
		return out
	}
	report := func(items []planner.Item) *publication {
		r := &publication{seen: map[string]bool{}}
		r.pl.Plan.Items = items
		r.reportUpdated()
		return r
	}

	run := items(1000, func(int) bool { return false })
	r := &publication{seen: map[string]bool{}}
	r.pl.Plan.Items = run
	if allocs := testing.AllocsPerRun(10, func() {
		r.res.Updated = nil
		r.reportUpdated()
	}); allocs != 0 {
		t.Errorf("reporting a run of 1000 updated records allocates %v times, want none", allocs)
	}
	if got := report(run).res.Updated; len(got) != len(run) || &got[0] != &run[0] {
		t.Errorf("the report of a run is not the plan's run (%d items)", len(got))
	}

	spread := items(1000, func(i int) bool { return i%100 == 0 })
	got := report(spread).res.Updated
	var want []string
	for _, it := range spread {
		if !it.Write {
			want = append(want, it.Path)
		}
	}
	if !slices.Equal(paths(got), want) {
		t.Errorf("reported %d updated records, want the %d not written", len(got), len(want))
	}
}

func paths(items []planner.Item) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = items[i].Path
	}
	return out
}
