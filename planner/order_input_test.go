package planner_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// The plan does not depend on the order the manifest lists its outputs in
// nor on whether the catalog's records come sorted: sorted inputs take the
// one-pass merges (records stepped through in order, gaps searched), the
// others the indexed paths, and both give the exact same items and next
// catalog.
func TestPlanIndependentOfInputOrder(t *testing.T) {
	var outs []catalog.Output
	stored := map[string]planner.Stored{}
	for i := range 60 {
		p := fmt.Sprintf("d%d/f%02d", i%3, i)
		owner := ownerA
		if i%7 == 0 {
			owner = ownerB // gaps of other owners' records between A's
		}
		outs = append(outs, rec(p, owner, srcOld, i))
		stored[p] = planner.Stored{Size: int64(i)}
	}
	var desired []planner.Desired
	for i := range 60 {
		p := fmt.Sprintf("d%d/f%02d", i%3, i)
		switch {
		case i%7 == 0 || i%11 == 0 || (i > 20 && i < 40):
			continue // not desired: another owner's, or deleted by a replacement
		case i%5 == 0:
			desired = append(desired, want(p, i+100)) // new bytes
		default:
			desired = append(desired, want(p, i)) // same bytes, new source
		}
	}
	for i := range 5 {
		desired = append(desired, want(fmt.Sprintf("d%d/new%d", i%3, i), 200+i)) // created
	}
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		sorted := slices.Clone(desired)
		slices.SortFunc(sorted, func(a, b planner.Desired) int { return strings.Compare(a.Path, b.Path) })
		ref, err := planner.Build(input(wf, cat(outs...), stored, sorted...))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ref.Writes()); got != 7+5 {
			t.Fatalf("reference plan writes %d outputs, want 12", got)
		}
		reversed := slices.Clone(sorted)
		slices.Reverse(reversed)
		unsorted := &catalog.Catalog{DistributorVersion: "v1", CreatedAt: cat().CreatedAt, UpdatedAt: cat().UpdatedAt, Outputs: slices.Clone(outs)}
		slices.Reverse(unsorted.Outputs)
		for name, in := range map[string]planner.Input{
			"desired reversed":  input(wf, cat(outs...), stored, reversed...),
			"records unsorted":  input(wf, unsorted, stored, sorted...),
			"both out of order": input(wf, unsorted, stored, reversed...),
		} {
			p, err := planner.Build(in)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(p.Items, ref.Items) || p.Changed != ref.Changed {
				t.Errorf("%s: items differ from the sorted inputs' plan", name)
			}
			if !reflect.DeepEqual(p.Next.Outputs, ref.Next.Outputs) || !p.Next.UpdatedAt.Equal(ref.Next.UpdatedAt) {
				t.Errorf("%s: next catalog differs from the sorted inputs' plan", name)
			}
		}
	})
}
