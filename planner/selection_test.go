package planner_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// nested is a universe of paths that are folders of each other, and
// paths that sort between a folder and what is below it.
var nested = []string{"a", "a/b", "a/b/c", "a-b", "a.b", "a/b-c", "b", "c/d", "c", "c/d/e", "c0", "g/h/i", "j"}

// TestPlanOfTheSelectionIsThePlanOfTheWhole: for any root and
// publication, the plan made from what Select selects (the records, and
// the stored objects but on a legacy root) is the plan of the whole, and
// catalog.Merge of the old catalog with its Next writes the whole plan's
// Next.
func TestPlanOfTheSelectionIsThePlanOfTheWhole(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawScenarioOf(t, rapid.SampledFrom([][]string{universe, nested}).Draw(t, "universe"))
		in := s.in
		if rapid.Bool().Draw(t, "other owners' records of this owner's source") && in.Catalog != nil {
			for i := range in.Catalog.Outputs {
				if rapid.Bool().Draw(t, "as owner B") {
					in.Catalog.Outputs[i].PipelineID = ownerB.PipelineID
				}
			}
		}
		whole, werr := planner.Build(in)

		sel := planner.Select(in.Owner, in.Desired)
		part := in
		var dropped []string
		if in.Catalog != nil {
			part.Catalog = in.Catalog.Successor()
			for i := range in.Catalog.Outputs {
				if o := &in.Catalog.Outputs[i]; sel.Record(o) {
					part.Catalog.Outputs = append(part.Catalog.Outputs, *o)
					dropped = append(dropped, o.Path)
				}
			}
			slices.Sort(dropped)
		}
		if !in.Legacy {
			part.Stored = map[string]planner.Stored{}
			for p, st := range in.Stored {
				if sel.Path(p) {
					part.Stored[p] = st
				}
			}
		}
		got, gerr := planner.Build(part)
		if errString(gerr) != errString(werr) {
			t.Fatalf("selection's error %v, whole's %v", gerr, werr)
		}
		if !reflect.DeepEqual(got.Items, whole.Items) || !reflect.DeepEqual(got.Collisions, whole.Collisions) ||
			!reflect.DeepEqual(got.Clear, whole.Clear) || got.Changed != whole.Changed || !reflect.DeepEqual(got.Superseded, whole.Superseded) {
			t.Fatalf("selection's plan\n%s\nwhole's\n%s", showPlan(got), showPlan(whole))
		}
		if (got.Next == nil) != (whole.Next == nil) {
			t.Fatalf("selection's Next %v, whole's %v", got.Next, whole.Next)
		}
		if whole.Next == nil {
			return
		}
		want, err := catalog.Marshal(whole.Next)
		if err != nil {
			t.Fatal(err)
		}
		old := []byte(nil)
		if in.Catalog != nil {
			if old, err = catalog.Marshal(in.Catalog); err != nil {
				t.Fatal(err)
			}
		} else if old, err = catalog.Marshal(&catalog.Catalog{CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		lay := catalog.NewLayout(int64(len(old)))
		if _, err := catalog.Scan(bytes.NewReader(old), int64(len(old)), func(r *catalog.Record) error { lay.Add(r); return nil }); err != nil {
			t.Fatal(err)
		}
		var merged bytes.Buffer
		if err := catalog.Merge(&merged, bytes.NewReader(old), lay, got.Next, dropped); err != nil {
			t.Fatalf("Merge: %v", err)
		}
		if !bytes.Equal(merged.Bytes(), want) {
			t.Fatalf("merged\n%s\nwhole's Next\n%s", merged.Bytes(), want)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
