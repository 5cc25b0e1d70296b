package planner_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// aged is rec updated at t0 + hours.
func aged(path string, o catalog.Owner, n, hours int) catalog.Output {
	r := rec(path, o, srcOld, n)
	r.CreatedAt = t0.Add(-200 * time.Hour)
	r.UpdatedAt = t0.Add(time.Duration(hours) * time.Hour)
	return r
}

// after is c with the given outputs, updated at now.
func after(c *catalog.Catalog, outs ...catalog.Output) *catalog.Catalog {
	n := *c
	n.Outputs = append([]catalog.Output{}, outs...)
	n.Sort()
	n.UpdatedAt = now
	return &n
}

func clone(c *catalog.Catalog) *catalog.Catalog {
	n := *c
	n.Outputs = append([]catalog.Output{}, c.Outputs...)
	return &n
}

func assertMaintenancePlan(t *testing.T, got, want planner.MaintenancePlan) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan differs\n got: removed=%q mismatches=%q changed=%v next=%s\nwant: removed=%q mismatches=%q changed=%v next=%s",
			recordPaths(got.Removed), got.SizeMismatches, got.Changed, showCat(got.Next),
			recordPaths(want.Removed), want.SizeMismatches, want.Changed, showCat(want.Next))
	}
}

func recordPaths(outs []catalog.Output) []string {
	var p []string
	for _, o := range outs {
		p = append(p, o.Path)
	}
	return p
}

func showCat(c *catalog.Catalog) string {
	if c == nil {
		return "nil"
	}
	var b strings.Builder
	b.WriteString("updated " + c.UpdatedAt.Format(time.RFC3339) + "\n")
	for _, o := range c.Outputs {
		b.WriteString("    " + showRec(o) + "\n")
	}
	return b.String()
}

var (
	pruneOld1  = aged("a/1.html", ownerA, 1, -10)
	pruneOld2  = aged("a/2.html", ownerA, 2, -5)
	pruneFresh = aged("a/3.html", ownerA, 3, 0)
	pruneB     = aged("b/old.html", ownerB, 4, -20)
	pruneA2    = aged("archive/old.html", ownerA2, 5, -20) // same pipeline, other destination
)

func pruneCatalog() *catalog.Catalog {
	return cat(pruneOld1, pruneOld2, pruneFresh, pruneB, pruneA2)
}

func TestPruneRemovesOwnersRecordsOlderThanCutoff(t *testing.T) {
	c := pruneCatalog()
	before := clone(c)
	p, err := planner.Prune(c, ownerA, t0.Add(-time.Hour), now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed: []catalog.Output{pruneOld1, pruneOld2},
		Next:    after(c, pruneFresh, pruneB, pruneA2),
		Changed: true,
	})
	if !reflect.DeepEqual(c, before) {
		t.Fatal("Prune modified its input catalog")
	}
}

// Other owners' records, however old, including the same pipeline's other
// destination, are never pruned.
func TestPruneLeavesOtherOwnersUntouched(t *testing.T) {
	c := pruneCatalog()
	p, err := planner.Prune(c, ownerB, now, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed: []catalog.Output{pruneB},
		Next:    after(c, pruneOld1, pruneOld2, pruneFresh, pruneA2),
		Changed: true,
	})
}

func TestPruneKeepsRecordExactlyAtCutoff(t *testing.T) {
	c := pruneCatalog()
	at := pruneOld2.UpdatedAt
	p, err := planner.Prune(c, ownerA, at, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed: []catalog.Output{pruneOld1},
		Next:    after(c, pruneOld2, pruneFresh, pruneB, pruneA2),
		Changed: true,
	})
	p, err = planner.Prune(c, ownerA, at.Add(time.Nanosecond), now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(recordPaths(p.Removed), []string{"a/1.html", "a/2.html"}) {
		t.Fatalf("one nanosecond past the cutoff: removed %q", recordPaths(p.Removed))
	}
}

func TestPruneNothingToDo(t *testing.T) {
	c := pruneCatalog()
	for name, owner := range map[string]catalog.Owner{"nothing old enough": ownerA, "owner has no records": {PipelineID: "x", DestinationID: "y"}} {
		t.Run(name, func(t *testing.T) {
			p, err := planner.Prune(c, owner, t0.Add(-100*time.Hour), now, 0)
			if err != nil {
				t.Fatal(err)
			}
			assertMaintenancePlan(t, p, planner.MaintenancePlan{Next: c})
		})
	}
	t.Run("no catalog", func(t *testing.T) {
		p, err := planner.Prune(nil, ownerA, now, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		assertMaintenancePlan(t, p, planner.MaintenancePlan{})
	})
}

func TestPruneMaxDeletesAborts(t *testing.T) {
	c := pruneCatalog()
	p, err := planner.Prune(c, ownerA, t0.Add(-time.Hour), now, 1)
	if !errors.Is(err, planner.ErrTooManyDeletes) || !strings.Contains(err.Error(), "2 deletes, max_deletes is 1; nothing was deleted") {
		t.Fatalf("err = %v", err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{})
	if p, err = planner.Prune(c, ownerA, t0.Add(-time.Hour), now, 2); err != nil || len(p.Removed) != 2 {
		t.Fatalf("max 2: removed %d, %v", len(p.Removed), err)
	}
}

func TestPruneRefusesBadInput(t *testing.T) {
	c := pruneCatalog()
	cases := map[string]func() error{
		"no pipeline":        func() error { _, err := planner.Prune(c, catalog.Owner{DestinationID: "d"}, t0, now, 0); return err },
		"no destination":     func() error { _, err := planner.Prune(c, catalog.Owner{PipelineID: "p"}, t0, now, 0); return err },
		"future cutoff":      func() error { _, err := planner.Prune(c, ownerA, now.Add(time.Second), now, 0); return err },
		"no now":             func() error { _, err := planner.Prune(c, ownerA, time.Time{}, time.Time{}, 0); return err },
		"no now, no catalog": func() error { _, err := planner.Prune(nil, ownerA, time.Time{}, time.Time{}, 0); return err },
	}
	for name, f := range cases {
		if err := f(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one refusing line", name, err)
		}
	}
	if _, err := planner.Prune(c, catalog.Owner{PipelineID: "p"}, t0, now, 0); !errors.Is(err, planner.ErrSelector) {
		t.Errorf("missing destination: %v, want ErrSelector", err)
	}
}

var (
	recPresent  = rec("a/present.html", ownerA, srcOld, 1)
	recMissing  = rec("a/missing.html", ownerA, srcOld, 2)
	recResized  = rec("a/resized.html", ownerA, srcOld, 3)
	recBMissing = rec("b/missing.html", ownerB, srcB, 4)
	recBResized = rec("b/resized.html", ownerB, srcB, 5)
	recA2Gone   = rec("archive/missing.html", ownerA2, srcOld, 6)
)

func reconcileFixture() (*catalog.Catalog, map[string]planner.Stored) {
	c := cat(recPresent, recMissing, recResized, recBMissing, recBResized, recA2Gone)
	stored := map[string]planner.Stored{
		"a/present.html": {Size: 1},
		"a/resized.html": {Size: 30},
		"b/resized.html": {Size: 0},
		"unmanaged.txt":  {Size: 7}, // never adopted
	}
	return c, stored
}

func TestReconcileOwnerSelectorOnlyTouchesThatOwner(t *testing.T) {
	c, stored := reconcileFixture()
	before := clone(c)
	p, err := planner.Reconcile(c, planner.Selector{Owner: &ownerA}, stored, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed:        []catalog.Output{recMissing},
		SizeMismatches: []string{"a/resized.html"},
		Next:           after(c, recPresent, recResized, recBMissing, recBResized, recA2Gone),
		Changed:        true,
	})
	if !reflect.DeepEqual(c, before) {
		t.Fatal("Reconcile modified its input catalog")
	}
}

func TestReconcileAllOwnersRepairsEveryRecord(t *testing.T) {
	c, stored := reconcileFixture()
	p, err := planner.Reconcile(c, planner.Selector{AllOwners: true}, stored, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed:        []catalog.Output{recMissing, recA2Gone, recBMissing},
		SizeMismatches: []string{"a/resized.html", "b/resized.html"},
		Next:           after(c, recPresent, recResized, recBResized), // no record for unmanaged.txt
		Changed:        true,
	})
}

func TestReconcileAllOwnersOfOneDestination(t *testing.T) {
	c, stored := reconcileFixture()
	p, err := planner.Reconcile(c, planner.Selector{AllOwners: true, DestinationID: "weather-archive"}, stored, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{
		Removed: []catalog.Output{recA2Gone},
		Next:    after(c, recPresent, recMissing, recResized, recBMissing, recBResized),
		Changed: true,
	})
}

func TestReconcileReportsSizeMismatchesWithoutChanging(t *testing.T) {
	c := cat(recPresent, recResized)
	p, err := planner.Reconcile(c, planner.Selector{AllOwners: true}, map[string]planner.Stored{
		"a/present.html": {Size: 1}, "a/resized.html": {Size: 30},
	}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{SizeMismatches: []string{"a/resized.html"}, Next: c})
}

func TestReconcileNeverAddsRecords(t *testing.T) {
	c := cat(recPresent)
	stored := map[string]planner.Stored{"a/present.html": {Size: 1}, "unmanaged.txt": {Size: 7}, "a/stray.html": {Size: 2}}
	for _, sel := range []planner.Selector{{AllOwners: true}, {Owner: &ownerA}} {
		p, err := planner.Reconcile(c, sel, stored, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		assertMaintenancePlan(t, p, planner.MaintenancePlan{Next: c})
	}
}

func TestReconcileNothingToDo(t *testing.T) {
	c := cat(recPresent)
	p, err := planner.Reconcile(c, planner.Selector{Owner: &ownerA}, map[string]planner.Stored{"a/present.html": {Size: 1}}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{Next: c})
	p, err = planner.Reconcile(nil, planner.Selector{AllOwners: true}, nil, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{})
}

func TestReconcileMaxDeletesAborts(t *testing.T) {
	c, stored := reconcileFixture()
	p, err := planner.Reconcile(c, planner.Selector{AllOwners: true}, stored, now, 2)
	if !errors.Is(err, planner.ErrTooManyDeletes) || !strings.Contains(err.Error(), "3 deletes, max_deletes is 2") {
		t.Fatalf("err = %v", err)
	}
	assertMaintenancePlan(t, p, planner.MaintenancePlan{})
	if p, err = planner.Reconcile(c, planner.Selector{AllOwners: true}, stored, now, 3); err != nil || len(p.Removed) != 3 {
		t.Fatalf("max 3: removed %d, %v", len(p.Removed), err)
	}
}

func TestSelector(t *testing.T) {
	bad := map[string]planner.Selector{
		"nothing":                    {},
		"destination only":           {DestinationID: "latest-html"},
		"owner and all":              {Owner: &ownerA, AllOwners: true},
		"owner without pipeline":     {Owner: &catalog.Owner{DestinationID: "d"}},
		"owner without destination":  {Owner: &catalog.Owner{PipelineID: "p"}},
		"owner with destination too": {Owner: &ownerA, DestinationID: "latest-html"},
	}
	for name, sel := range bad {
		err := sel.Validate()
		if !errors.Is(err, planner.ErrSelector) {
			t.Errorf("%s: Validate = %v, want ErrSelector", name, err)
		}
		if _, rerr := planner.Reconcile(cat(), sel, nil, now, 0); !errors.Is(rerr, planner.ErrSelector) {
			t.Errorf("%s: Reconcile = %v, want ErrSelector", name, rerr)
		}
	}
	a, b, a2 := rec("x", ownerA, srcOld, 1), rec("y", ownerB, srcB, 1), rec("z", ownerA2, srcOld, 1)
	for _, tc := range []struct {
		sel  planner.Selector
		want []bool
	}{
		{planner.Selector{Owner: &ownerA}, []bool{true, false, false}},
		{planner.Selector{AllOwners: true}, []bool{true, true, true}},
		{planner.Selector{AllOwners: true, DestinationID: "latest-html"}, []bool{true, true, false}},
	} {
		got := []bool{tc.sel.Matches(a), tc.sel.Matches(b), tc.sel.Matches(a2)}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v matches %v, want %v", tc.sel, got, tc.want)
		}
	}
}
