package planner_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// Versions of one source: v(n, created) is weatherreporter.today with
// manifest digest dig(n), created at t0 plus the given hours.
func ver(n, hours int) catalog.Source {
	return catalog.Source{ID: "weatherreporter.today", Digest: dig(n), Created: t0.Add(time.Duration(hours) * time.Hour)}
}

var (
	v3   = ver(3, 3)
	v5   = ver(5, 5)
	v5lo = ver(4, 5) // created with v5, smaller digest
	v5hi = ver(6, 5) // created with v5, greater digest
	v7   = ver(7, 7)
)

// withSource is in publishing s.
func withSource(in planner.Input, s catalog.Source) planner.Input {
	in.Source = s
	return in
}

func TestNewestWinsPerOwnerAndSource(t *testing.T) {
	live := rec("a/index.html", ownerA, v5, 10)
	page := want("a/index.html", 12)
	cases := []struct {
		name   string
		recs   []catalog.Output
		src    catalog.Source
		older  bool // AllowOlder
		wf     planner.Workflow
		winner *catalog.Source // nil: not superseded
	}{
		{"older created loses", []catalog.Output{live}, v3, false, planner.Replacement, &v5},
		{"older created loses (additive)", []catalog.Output{live}, v3, false, planner.Additive, &v5},
		{"equal created, smaller digest loses", []catalog.Output{live}, v5lo, false, planner.Replacement, &v5},
		{"equal created, greater digest wins", []catalog.Output{live}, v5hi, false, planner.Replacement, nil},
		{"newer created wins", []catalog.Output{live}, v7, false, planner.Replacement, nil},
		{"same version is a redelivery, not superseded", []catalog.Output{live}, v5, false, planner.Replacement, nil},
		{"allow older rolls back", []catalog.Output{live}, v3, true, planner.Replacement, nil},
		{"newest of several records counts", []catalog.Output{rec("a/old.html", ownerA, v3, 1), rec("b.html", ownerA, v7, 2)}, v5, false, planner.Additive, &v7},
		{"other pipeline's newer version does not count", []catalog.Output{rec("a/index.html", ownerB, v5, 10)}, v3, false, planner.Replacement, nil},
		{"same pipeline's other destination does not count", []catalog.Output{rec("a/index.html", ownerA2, v5, 10)}, v3, false, planner.Replacement, nil},
		{"other source id does not count", []catalog.Output{rec("a/index.html", ownerA, srcNew, 10)}, catalog.Source{ID: "other", Digest: dig(1), Created: t0}, false, planner.Replacement, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cat(tc.recs...)
			in := withSource(input(tc.wf, c, storedOf(tc.recs), page), tc.src)
			in.AllowOlder = tc.older
			p := build(t, in)
			if tc.winner == nil {
				if p.Superseded != nil {
					t.Fatalf("superseded by %+v, want a plan", *p.Superseded)
				}
				if p.Next == nil {
					t.Fatal("no next catalog")
				}
				if r, _ := p.Next.Lookup("a/index.html"); r.Source != tc.src || r.SHA256 != page.SHA256 {
					t.Fatalf("a/index.html recorded as %s", showRec(r))
				}
				return
			}
			assertPlan(t, p, planner.Plan{Superseded: tc.winner})
			if p.Writes() != nil || p.Deletes() != nil {
				t.Fatal("superseded plan acts")
			}
		})
	}
}

// Superseded comes before anything the older bundle would have run into:
// a collision or an empty replacement.
func TestSupersededBeforeCollisionsAndRefusals(t *testing.T) {
	live := rec("a/index.html", ownerA, v5, 10)
	c := cat(live)
	in := withSource(input(planner.Replacement, c, storedOf([]catalog.Output{live}, "notes.txt"), want("notes.txt", 1)), v3)
	assertPlan(t, build(t, in), planner.Plan{Superseded: &v5})
	empty := withSource(input(planner.Replacement, c, storedOf([]catalog.Output{live})), v3)
	assertPlan(t, build(t, empty), planner.Plan{Superseded: &v5})
}

func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		a, b catalog.Source
		want bool
	}{
		{v5, v3, true}, {v3, v5, false}, {v5hi, v5, true}, {v5, v5hi, false}, {v5, v5, false},
		// The same instant in another zone is the same created time.
		{ver(4, 5), catalog.Source{ID: v5.ID, Digest: dig(5), Created: v5.Created.In(time.FixedZone("x", 3600))}, false},
	} {
		if got := planner.Newer(tc.a, tc.b); got != tc.want {
			t.Errorf("Newer(%s %s, %s %s) = %v, want %v", tc.a.Created, tc.a.Digest[len(tc.a.Digest)-2:], tc.b.Created, tc.b.Digest[len(tc.b.Digest)-2:], got, tc.want)
		}
	}
}

// Applying N versions of one source in any order, one after another, ends
// with the newest version's records; every version applied after a newer
// one is superseded (and changes nothing), every other one is planned.
// Other owners' newer versions of the same source never interfere.
func TestNewestWinsInAnyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		wf := rapid.SampledFrom(bothWorkflows).Draw(t, "workflow")
		n := rapid.IntRange(2, 6).Draw(t, "versions")
		type version struct {
			src     catalog.Source
			desired []planner.Desired
		}
		vs := make([]version, n)
		for i := range vs {
			// Few distinct created times, so that ties are common.
			vs[i].src = ver(100+i, rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("created %d", i)))
			for _, p := range rapid.SliceOfNDistinct(rapid.SampledFrom(universe), 1, len(universe), rapid.ID[string]).Draw(t, fmt.Sprintf("paths %d", i)) {
				vs[i].desired = append(vs[i].desired, want(p, contentN.Draw(t, fmt.Sprintf("content %d %s", i, p))))
			}
		}
		newestI := 0
		for i := range vs {
			if planner.Newer(vs[i].src, vs[newestI].src) {
				newestI = i
			}
		}
		// Other owners hold an even newer version of the same source.
		far := ver(999, 100)
		others := []catalog.Output{rec("zz/b", ownerB, far, 1), rec("zz/a2", ownerA2, far, 2)}
		c := cat(others...)
		stored := storedOf(others)

		order := rapid.Permutation(seq(n)).Draw(t, "order")
		var applied []int
		for step, i := range order {
			in := planner.Input{
				Owner: ownerA, Source: vs[i].src, Workflow: wf, Desired: vs[i].desired, Catalog: c,
				Stored: stored, Now: now.Add(time.Duration(step) * time.Minute), DistributorVersion: "v2",
			}
			p, err := planner.Build(in)
			if err != nil {
				t.Fatalf("step %d (version %d): %v", step, i, err)
			}
			var beatenBy *catalog.Source
			for _, j := range applied {
				if planner.Newer(vs[j].src, vs[i].src) && (beatenBy == nil || planner.Newer(vs[j].src, *beatenBy)) {
					beatenBy = &vs[j].src
				}
			}
			if beatenBy != nil {
				if p.Superseded == nil || *p.Superseded != *beatenBy || p.Next != nil || p.Changed || p.Items != nil || p.Writes() != nil || p.Deletes() != nil {
					t.Fatalf("step %d: version %d after newer %s: plan\n%s superseded=%v", step, i, beatenBy.Digest, showPlan(p), p.Superseded)
				}
				continue
			}
			if p.Superseded != nil || p.Next == nil {
				t.Fatalf("step %d: version %d superseded by %+v; applied %v", step, i, p.Superseded, applied)
			}
			stored, c = apply(in, p)
			applied = append(applied, i)
		}

		// The newest version's outputs are recorded and stored as it wants.
		idx := c.Index()
		for _, d := range vs[newestI].desired {
			r, ok := idx[d.Path]
			if !ok || r.Owner() != ownerA || r.Source != vs[newestI].src || r.SHA256 != d.SHA256 || stored[d.Path].Size != d.Size {
				t.Fatalf("%s recorded as %s, want version %d", d.Path, showRec(r), newestI)
			}
		}
		var own []string
		for _, o := range c.Outputs {
			if o.Owner() == ownerA {
				own = append(own, o.Path)
			}
		}
		if wf == planner.Replacement {
			var want []string
			for _, d := range vs[newestI].desired {
				want = append(want, d.Path)
			}
			sort.Strings(want)
			if !reflect.DeepEqual(own, want) {
				t.Fatalf("owner's records %q, newest version desires %q", own, want)
			}
		}
		for _, o := range others {
			if r, ok := idx[o.Path]; !ok || !reflect.DeepEqual(r, o) {
				t.Fatalf("other owner's record %s changed: %s", o.Path, showRec(r))
			}
		}

		// Redelivering any version afterwards: the newest is a no-op, the
		// others are superseded by it.
		for i := range vs {
			p, err := planner.Build(planner.Input{
				Owner: ownerA, Source: vs[i].src, Workflow: wf, Desired: vs[i].desired, Catalog: c,
				Stored: stored, Now: now.Add(time.Hour), DistributorVersion: "v2",
			})
			if err != nil {
				t.Fatal(err)
			}
			if i == newestI {
				if p.Superseded != nil || p.Changed {
					t.Fatalf("redelivered newest: superseded %v changed %v", p.Superseded, p.Changed)
				}
			} else if p.Superseded == nil || *p.Superseded != vs[newestI].src {
				t.Fatalf("redelivered version %d: superseded by %v, want the newest", i, p.Superseded)
			}
		}
	})
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
