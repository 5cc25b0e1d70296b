package planner_test

import (
	"errors"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// A small universe of paths and owners, so that catalogs, storage and
// publications overlap often.
var (
	universe = []string{"a", "b", "c/d", "c/e", "f.html", "g/h/i", "j"}
	owners   = []catalog.Owner{ownerA, ownerB, ownerA2}
	// srcOlder is an earlier version of srcOld: a publication meets newer
	// and older versions of its own source.
	srcOlder  = catalog.Source{ID: srcOld.ID, Digest: dig(999), Created: srcOld.Created.Add(-time.Hour)}
	sources   = []catalog.Source{srcOld, srcNew, srcB, srcOlder}
	ownerGen  = rapid.SampledFrom(owners)
	sourceGen = rapid.SampledFrom(sources)
	contentN  = rapid.IntRange(0, 3)
	hourGen   = rapid.IntRange(-100, 0)
)

type scenario struct {
	in        planner.Input
	managed   map[string]catalog.Output // the catalog's records
	desired   map[string]planner.Desired
	unmanaged map[string]bool // in Stored, not in the catalog
}

func drawScenario(t *rapid.T) scenario { return drawScenarioOf(t, universe) }

// drawScenarioOf draws a scenario over the paths of universe.
func drawScenarioOf(t *rapid.T, universe []string) scenario {
	s := scenario{managed: map[string]catalog.Output{}, desired: map[string]planner.Desired{}, unmanaged: map[string]bool{}}
	in := planner.Input{
		Owner: ownerA, Source: sourceGen.Draw(t, "source"), Now: now, DistributorVersion: "v2",
		Workflow: rapid.SampledFrom(bothWorkflows).Draw(t, "workflow"),
		Stored:   map[string]planner.Stored{},
	}
	switch rapid.IntRange(0, 4).Draw(t, "state") {
	case 0: // no catalog yet
	case 1:
		in.Legacy = true
	default:
		in.Catalog = &catalog.Catalog{DistributorVersion: "v1", CreatedAt: t0.Add(-1000 * time.Hour), UpdatedAt: t0}
	}
	for _, p := range universe {
		if in.Catalog != nil && rapid.Bool().Draw(t, "managed "+p) {
			o := rec(p, ownerGen.Draw(t, "owner "+p), sourceGen.Draw(t, "src "+p), contentN.Draw(t, "n "+p))
			if rapid.IntRange(0, 2).Draw(t, "a version of the source "+p) == 0 {
				// Older, as old with a greater digest (newer), or newer.
				h := rapid.SampledFrom([]int{1, 0, -1}).Draw(t, "version "+p)
				o.Source = catalog.Source{ID: in.Source.ID, Digest: dig(3000 + h), Created: in.Source.Created.Add(time.Duration(h) * time.Hour)}
			}
			if rapid.Bool().Draw(t, "generated "+p) {
				o.Kind, o.SourcePath, o.Transform = catalog.KindGenerated, "report.md", "markdown_to_html"
			}
			o.CreatedAt = t0.Add(time.Duration(hourGen.Draw(t, "created "+p)) * time.Hour)
			o.UpdatedAt = o.CreatedAt.Add(time.Duration(rapid.IntRange(0, 50).Draw(t, "age "+p)) * time.Hour)
			in.Catalog.Outputs = append(in.Catalog.Outputs, o)
			s.managed[p] = o
			switch rapid.IntRange(0, 3).Draw(t, "stored "+p) {
			case 0: // bytes missing
			case 1:
				in.Stored[p] = planner.Stored{Size: o.Size + 1}
			default:
				in.Stored[p] = planner.Stored{Size: o.Size}
			}
		} else if rapid.Bool().Draw(t, "unmanaged "+p) {
			in.Stored[p] = planner.Stored{Size: int64(contentN.Draw(t, "size "+p))}
			s.unmanaged[p] = true
		}
		if rapid.Bool().Draw(t, "desired "+p) {
			d := want(p, contentN.Draw(t, "want "+p))
			if rapid.Bool().Draw(t, "want generated "+p) {
				d.Kind, d.From, d.Transform = catalog.KindGenerated, "report.md", "markdown_to_html"
			}
			if rapid.Bool().Draw(t, "url "+p) {
				d.URL = "https://x.example/" + p
			}
			in.Desired = append(in.Desired, d)
			s.desired[p] = d
		}
	}
	in.Desired = rapid.Permutation(in.Desired).Draw(t, "order")
	in.TakeOwnership = rapid.Bool().Draw(t, "take")
	in.AllowOlder = rapid.IntRange(0, 3).Draw(t, "allow older") == 3
	in.DeleteLater = rapid.Bool().Draw(t, "delete later")
	in.MaxDeletes = rapid.IntRange(0, 4).Draw(t, "max-deletes")
	s.in = in
	return s
}

func TestPlannerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawScenario(t)
		in := s.in
		p, err := planner.Build(in)

		// Newest wins: a newer version of the source among the owner's
		// records supersedes a replacement whole; an additive publication
		// keeps exactly the paths recorded with a newer version of any of
		// the owner's sources.
		newerAt := func(path string) bool {
			o, ok := s.managed[path]
			return ok && !in.AllowOlder && o.Owner() == ownerA && (in.Workflow == planner.Additive || o.Source.ID == in.Source.ID) &&
				planner.Newer(o.Source, in.Source)
		}
		var newest *catalog.Source
		for path, o := range s.managed {
			if newerAt(path) && (newest == nil || planner.Newer(o.Source, *newest)) {
				newest = &o.Source
			}
		}
		if in.Workflow == planner.Replacement && newest != nil {
			if err != nil || p.Superseded == nil || *p.Superseded != *newest || p.Items != nil || p.Next != nil || p.Changed {
				t.Fatalf("replacement older than %+v: err %v, plan\n%s superseded=%v", *newest, err, showPlan(p), p.Superseded)
			}
			return
		}
		if p.Superseded != nil {
			t.Fatalf("superseded by %+v", *p.Superseded)
		}
		kept := map[string]bool{}
		for path := range s.desired {
			if newerAt(path) {
				kept[path] = true
			}
		}
		var wantDeletes []string
		if in.Workflow == planner.Replacement {
			for path, o := range s.managed {
				if _, ok := s.desired[path]; !ok && o.Owner() == ownerA {
					wantDeletes = append(wantDeletes, path)
				}
			}
			if in.Legacy {
				for path := range in.Stored {
					if _, ok := s.desired[path]; !ok {
						wantDeletes = append(wantDeletes, path)
					}
				}
			}
		} else if in.AllowOlder && in.DeleteLater {
			// An additive roll back with DeleteLater deletes the owner's
			// records of newer versions of its source that it does not
			// rewrite.
			for path, o := range s.managed {
				if _, ok := s.desired[path]; !ok && o.Owner() == ownerA && o.Source.ID == in.Source.ID && planner.Newer(o.Source, in.Source) {
					wantDeletes = append(wantDeletes, path)
				}
			}
		}
		sort.Strings(wantDeletes)

		switch {
		case in.Workflow == planner.Replacement && len(s.desired) == 0 && len(wantDeletes) > 0:
			if !errors.Is(err, planner.ErrEmptyReplacement) {
				t.Fatalf("empty replacement deleting %q: err = %v", wantDeletes, err)
			}
			return
		case in.MaxDeletes > 0 && len(wantDeletes) > in.MaxDeletes:
			if !errors.Is(err, planner.ErrTooManyDeletes) || p.Next != nil {
				t.Fatalf("%d deletes over max %d: err = %v", len(wantDeletes), in.MaxDeletes, err)
			}
			return
		case err != nil:
			t.Fatalf("Build: %v", err)
		}

		// Items: sorted, one per path.
		for i := 1; i < len(p.Items); i++ {
			if p.Items[i-1].Path >= p.Items[i].Path {
				t.Fatalf("items not sorted and unique: %q", paths(p.Items))
			}
		}

		// Collisions are exactly the desired unmanaged paths in storage.
		var wantColl []string
		if !in.Legacy && !in.TakeOwnership {
			for path := range s.desired {
				if s.unmanaged[path] {
					wantColl = append(wantColl, path)
				}
			}
			sort.Strings(wantColl)
		}
		if !reflect.DeepEqual(p.Collisions, wantColl) {
			t.Fatalf("collisions = %q, want %q", p.Collisions, wantColl)
		}
		if p.Blocked() {
			if p.Next != nil || p.Changed || p.Writes() != nil || p.Deletes() != nil {
				t.Fatalf("blocked plan acts: next %v changed %v", p.Next != nil, p.Changed)
			}
			return
		}
		if p.Next == nil {
			t.Fatal("unblocked plan without a next catalog")
		}

		if got := p.Deletes(); !reflect.DeepEqual(got, wantDeletes) {
			t.Fatalf("deletes = %q, want %q", got, wantDeletes)
		}
		// Unmanaged paths are written only when adopted (or on a legacy
		// first run) and deleted only by a legacy replacement clear.
		for _, it := range p.Writes() {
			if s.unmanaged[it.Path] && !in.Legacy && !in.TakeOwnership {
				t.Fatalf("writes unmanaged %q", it.Path)
			}
			if it.Adopted != (s.unmanaged[it.Path] && !in.Legacy) {
				t.Fatalf("%q adopted = %v", it.Path, it.Adopted)
			}
		}
		for _, path := range p.Deletes() {
			if s.unmanaged[path] && !(in.Legacy && in.Workflow == planner.Replacement) {
				t.Fatalf("deletes unmanaged %q", path)
			}
		}

		// Next reads back as written.
		b, err := catalog.Marshal(p.Next)
		if err != nil {
			t.Fatalf("Marshal(next): %v", err)
		}
		back, legacy, err := catalog.Parse(b)
		if err != nil || legacy || !reflect.DeepEqual(normPlan(planner.Plan{Next: back}), normPlan(planner.Plan{Next: p.Next})) {
			t.Fatalf("next does not round-trip (legacy %v, %v)", legacy, err)
		}

		next := p.Next.Index()
		// Kept paths are kept: not written, their records as they were.
		for _, it := range p.Items {
			if (it.Action == planner.KeptNewer) != kept[it.Path] {
				t.Fatalf("%q planned %s, kept for a newer version: %v", it.Path, it.Action, kept[it.Path])
			}
		}
		for path := range kept {
			if r, ok := next[path]; !ok || !reflect.DeepEqual(r, s.managed[path]) || slices.ContainsFunc(p.Writes(), func(it planner.Item) bool { return it.Path == path }) {
				t.Fatalf("kept %q written, or recorded as %s", path, showRec(r))
			}
		}
		// Every other desired output is recorded as the owner's, created_at kept.
		for path, d := range s.desired {
			if kept[path] {
				continue
			}
			r, ok := next[path]
			if !ok || r.Owner() != ownerA || r.SHA256 != d.SHA256 || r.Size != d.Size || r.URL != d.URL || r.Source != in.Source {
				t.Fatalf("desired %q recorded as %s", path, showRec(r))
			}
			if old, was := s.managed[path]; was && !r.CreatedAt.Equal(old.CreatedAt) {
				t.Fatalf("%q created_at %s, was %s", path, r.CreatedAt, old.CreatedAt)
			}
		}
		// Records not desired are kept as they were, unless replacement
		// drops the owner's, or a roll back with DeleteLater the owner's of
		// newer versions of its source.
		for path, old := range s.managed {
			if _, ok := s.desired[path]; ok {
				continue
			}
			r, kept := next[path]
			switch {
			case in.Workflow == planner.Replacement && old.Owner() == ownerA:
				if kept {
					t.Fatalf("replacement kept %q", path)
				}
			case in.AllowOlder && in.DeleteLater && in.Workflow == planner.Additive && old.Owner() == ownerA && old.Source.ID == in.Source.ID && planner.Newer(old.Source, in.Source):
				if kept {
					t.Fatalf("roll back kept %q of a newer version", path)
				}
			case !kept || !reflect.DeepEqual(r, old):
				t.Fatalf("record %q not kept as it was: %s", path, showRec(r))
			}
		}
		// Replacement: the owner's records are exactly the desired set.
		if in.Workflow == planner.Replacement {
			var ownPaths, desiredPaths []string
			for _, o := range p.Next.Outputs {
				if o.Owner() == ownerA {
					ownPaths = append(ownPaths, o.Path)
				}
			}
			for path := range s.desired {
				desiredPaths = append(desiredPaths, path)
			}
			sort.Strings(desiredPaths)
			if !reflect.DeepEqual(ownPaths, desiredPaths) {
				t.Fatalf("owner's records %q, desired %q", ownPaths, desiredPaths)
			}
		}
		// Nothing else gets in: no unmanaged path that was not desired.
		if len(next) != len(p.Next.Outputs) {
			t.Fatal("duplicate paths in next")
		}
		for path := range next {
			if _, d := s.desired[path]; !d {
				if _, m := s.managed[path]; !m {
					t.Fatalf("next records %q, neither desired nor managed", path)
				}
			}
		}

		// A plan that changes nothing does nothing.
		if !p.Changed {
			if p.Writes() != nil || p.Deletes() != nil || !sameCatalog(p.Next, in.Catalog) {
				t.Fatal("unchanged plan acts")
			}
		}
		if in.Catalog == nil && !p.Changed {
			t.Fatal("a first run must write a catalog")
		}
		if p.Changed && !p.Next.UpdatedAt.Equal(in.Now) {
			t.Fatalf("changed catalog updated_at %s", p.Next.UpdatedAt)
		}

		// Applying the plan and planning again is a no-op, even later.
		again := in
		again.Stored, again.Catalog = apply(in, p)
		again.Legacy = false
		again.Now = now.Add(time.Hour)
		p2, err := planner.Build(again)
		if err != nil {
			t.Fatalf("re-plan: %v", err)
		}
		if p2.Changed || p2.Blocked() || p2.Writes() != nil || p2.Deletes() != nil || !reflect.DeepEqual(p2.Next, p.Next) {
			t.Fatalf("re-plan after apply is not a no-op:\n%s", showPlan(p2))
		}
	})
}

func TestMaintenanceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawScenario(t)
		if s.in.Catalog == nil {
			return
		}
		c := s.in.Catalog
		c.Sort()
		cutoff := t0.Add(time.Duration(hourGen.Draw(t, "cutoff")) * time.Hour)
		owner := ownerGen.Draw(t, "prune owner")

		pr, err := planner.Prune(c, owner, cutoff, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		var kept []catalog.Output
		var removed []catalog.Output
		for _, o := range c.Outputs {
			if o.Owner() == owner && o.UpdatedAt.Before(cutoff) {
				removed = append(removed, o)
			} else {
				kept = append(kept, o)
			}
		}
		assertMaintenance(t, pr, c, removed, kept, nil)

		sel := planner.Selector{AllOwners: true}
		if rapid.Bool().Draw(t, "one owner") {
			sel = planner.Selector{Owner: &owner}
		} else if rapid.Bool().Draw(t, "one destination") {
			sel.DestinationID = owner.DestinationID
		}
		rc, err := planner.Reconcile(c, sel, s.in.Stored, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		kept, removed = nil, nil
		var mismatches []string
		for _, o := range c.Outputs {
			st, ok := s.in.Stored[o.Path]
			switch {
			case !sel.Matches(o):
				kept = append(kept, o)
			case !ok:
				removed = append(removed, o)
			default:
				if st.Size != o.Size {
					mismatches = append(mismatches, o.Path)
				}
				kept = append(kept, o)
			}
		}
		assertMaintenance(t, rc, c, removed, kept, mismatches)
	})
}

func assertMaintenance(t *rapid.T, p planner.MaintenancePlan, in *catalog.Catalog, removed, kept []catalog.Output, mismatches []string) {
	t.Helper()
	if !reflect.DeepEqual(p.Removed, removed) || !reflect.DeepEqual(p.SizeMismatches, mismatches) {
		t.Fatalf("removed %d (want %d), mismatches %q (want %q)", len(p.Removed), len(removed), p.SizeMismatches, mismatches)
	}
	if p.Changed != (len(removed) > 0) {
		t.Fatalf("changed = %v with %d removed", p.Changed, len(removed))
	}
	want := *in
	want.Outputs = append([]catalog.Output{}, kept...)
	if p.Changed {
		want.UpdatedAt = now
	}
	if !reflect.DeepEqual(p.Next, &want) {
		t.Fatalf("next catalog differs")
	}
	if _, err := catalog.Marshal(p.Next); err != nil {
		t.Fatal(err)
	}
}

// sameCatalog is reflect.DeepEqual with no records and an empty list of
// records alike (they encode alike: "outputs": []).
func sameCatalog(a, b *catalog.Catalog) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Outputs) == 0 && len(b.Outputs) == 0 {
		ac, bc := *a, *b
		ac.Outputs, bc.Outputs = nil, nil
		return reflect.DeepEqual(ac, bc)
	}
	return reflect.DeepEqual(a, b)
}
