package planner_test

import (
	"fmt"
	"reflect"
	"slices"
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

// Replacement: a bundle is the owner's whole set, so an older one loses
// whole (superseded) to the newest version the owner's records hold.
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
		{"equal created, smaller digest loses", []catalog.Output{live}, v5lo, false, planner.Replacement, &v5},
		{"equal created, greater digest wins", []catalog.Output{live}, v5hi, false, planner.Replacement, nil},
		{"newer created wins", []catalog.Output{live}, v7, false, planner.Replacement, nil},
		{"same version is a redelivery, not superseded", []catalog.Output{live}, v5, false, planner.Replacement, nil},
		{"allow older rolls back", []catalog.Output{live}, v3, true, planner.Replacement, nil},
		{"newest of several records counts", []catalog.Output{rec("a/old.html", ownerA, v3, 1), rec("b.html", ownerA, v7, 2)}, v5, false, planner.Replacement, &v7},
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

// A replacement is superseded before anything the older bundle would have
// run into: a collision or an empty replacement.
func TestSupersededBeforeCollisionsAndRefusals(t *testing.T) {
	live := rec("a/index.html", ownerA, v5, 10)
	c := cat(live)
	in := withSource(input(planner.Replacement, c, storedOf([]catalog.Output{live}, "notes.txt"), want("notes.txt", 1)), v3)
	assertPlan(t, build(t, in), planner.Plan{Superseded: &v5})
	empty := withSource(input(planner.Replacement, c, storedOf([]catalog.Output{live})), v3)
	assertPlan(t, build(t, empty), planner.Plan{Superseded: &v5})
}

// recordOf is the record ownerA's publication of s at now gives d.
func recordOf(d planner.Desired, s catalog.Source, createdAt time.Time) catalog.Output {
	o := written(d, createdAt)
	o.Source = s
	return o
}

func keptNewer(d planner.Desired, r catalog.Output) planner.Item {
	return planner.Item{Path: d.Path, Action: planner.KeptNewer, Desired: &d, Record: r}
}

// Additive: a bundle is a patch, so newest wins per path. An older version
// than the owner holds writes the paths no newer version of the owner's
// (of any source) wrote and keeps (KeptNewer) those one did: their records
// stay exactly as they were. It is never superseded. Records of other
// owners are overwritten as always. AllowOlder (a roll back) overwrites
// everything and keeps the owner's other records; with DeleteLater it also
// deletes the owner's records of newer versions of the source that it does
// not rewrite.
func TestAdditiveNewestWinsPerPath(t *testing.T) {
	common := rec("common.txt", ownerA, v5, 10)
	day5 := rec("day-5.txt", ownerA, v5, 5)
	day1 := rec("day-1.txt", ownerA, ver(1, 1), 1) // an older version's
	wCommon, wDay3, wDay1 := want("common.txt", 3), want("day-3.txt", 3), want("day-1.txt", 33)
	docs, docsIdx := want("docs", 3), want("docs/index.txt", 3)
	// A version of another source of the owner, newer than v5.
	v7other := catalog.Source{ID: "weatherreporter.week", Digest: dig(77), Created: v7.Created}
	v1other := catalog.Source{ID: "weatherreporter.week", Digest: dig(71), Created: t0.Add(time.Hour)}
	// A version a producer whose clock ran ahead stamped.
	future := catalog.Source{ID: "weatherreporter.today", Digest: dig(99), Created: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}
	cases := []struct {
		name      string
		recs      []catalog.Output
		unmanaged []string
		src       catalog.Source
		older     bool // AllowOlder
		later     bool // DeleteLater
		take      bool // TakeOwnership
		desired   []planner.Desired
		items     []planner.Item
		next      []catalog.Output // nil: blocked
		changed   bool
	}{
		{
			name: "older patch writes its own paths and keeps the newer ones", recs: []catalog.Output{common, day5, day1}, src: v3,
			desired: []planner.Desired{wCommon, wDay3, wDay1},
			items:   []planner.Item{keptNewer(wCommon, common), update(wDay1, recordOf(wDay1, v3, t0), true), create(wDay3, recordOf(wDay3, v3, now))},
			next:    []catalog.Output{common, day5, recordOf(wDay1, v3, t0), recordOf(wDay3, v3, now)}, changed: true,
		},
		{
			name: "every path newer: nothing written, not superseded", recs: []catalog.Output{common, day5}, src: v3,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{keptNewer(wCommon, common)},
			next:    []catalog.Output{common, day5},
		},
		{
			name: "equal created, smaller digest keeps", recs: []catalog.Output{common}, src: v5lo,
			desired: []planner.Desired{wCommon, wDay3},
			items:   []planner.Item{keptNewer(wCommon, common), create(wDay3, recordOf(wDay3, v5lo, now))},
			next:    []catalog.Output{common, recordOf(wDay3, v5lo, now)}, changed: true,
		},
		{
			name: "equal created, greater digest writes", recs: []catalog.Output{common}, src: v5hi,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v5hi, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v5hi, t0)}, changed: true,
		},
		{
			name: "allow older overwrites and keeps the newer versions' other paths (roll back)", recs: []catalog.Output{common, day5, day1}, src: v3, older: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day5, day1}, changed: true,
		},
		{
			name: "allow older and delete later deletes the newer versions' other paths", recs: []catalog.Output{common, day5, day1}, src: v3, older: true, later: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true), del(day5)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day1}, changed: true,
		},
		{
			name: "delete later without allow older deletes nothing", recs: []catalog.Output{common, day5, day1}, src: v3, later: true,
			desired: []planner.Desired{wCommon, wDay3},
			items:   []planner.Item{keptNewer(wCommon, common), create(wDay3, recordOf(wDay3, v3, now))},
			next:    []catalog.Output{common, day5, day1, recordOf(wDay3, v3, now)}, changed: true,
		},
		{
			name: "roll back keeps other owners' and other sources' newer records", recs: []catalog.Output{common, rec("day-5.txt", ownerB, v5, 5), rec("day-7.txt", ownerA, srcNew, 7), rec("day-9.txt", ownerA2, v7, 9)},
			src: v3, older: true, later: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), rec("day-5.txt", ownerB, v5, 5), rec("day-7.txt", ownerA, srcNew, 7), rec("day-9.txt", ownerA2, v7, 9)}, changed: true,
		},
		{
			name: "a record from the future is replaced by a roll back", recs: []catalog.Output{rec("common.txt", ownerA, future, 10), rec("day-5.txt", ownerA, future, 5)},
			src: v3, older: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), rec("day-5.txt", ownerA, future, 5)}, changed: true,
		},
		{
			name: "a record from the future is rolled back with delete later", recs: []catalog.Output{rec("common.txt", ownerA, future, 10), rec("day-5.txt", ownerA, future, 5)},
			src: v3, older: true, later: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true), del(rec("day-5.txt", ownerA, future, 5))},
			next:    []catalog.Output{recordOf(wCommon, v3, t0)}, changed: true,
		},
		{
			name: "another pipeline's newer version is overwritten", recs: []catalog.Output{rec("common.txt", ownerB, v5, 10), day5}, src: v3,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day5}, changed: true,
		},
		{
			name: "the same pipeline's other destination's newer version is overwritten", recs: []catalog.Output{rec("common.txt", ownerA2, v7, 10), day5}, src: v3,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day5}, changed: true,
		},
		{
			name: "another source's newer record of the owner is kept", recs: []catalog.Output{rec("common.txt", ownerA, v7other, 10), day5}, src: v3,
			desired: []planner.Desired{wCommon, wDay3},
			items:   []planner.Item{keptNewer(wCommon, rec("common.txt", ownerA, v7other, 10)), create(wDay3, recordOf(wDay3, v3, now))},
			next:    []catalog.Output{rec("common.txt", ownerA, v7other, 10), day5, recordOf(wDay3, v3, now)}, changed: true,
		},
		{
			name: "another source's older record of the owner is overwritten", recs: []catalog.Output{rec("common.txt", ownerA, v1other, 10), day5}, src: v3,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day5}, changed: true,
		},
		{
			name: "another source's newer record is overwritten by a roll back", recs: []catalog.Output{rec("common.txt", ownerA, v7other, 10), day5}, src: v3, older: true,
			desired: []planner.Desired{wCommon},
			items:   []planner.Item{update(wCommon, recordOf(wCommon, v3, t0), true)},
			next:    []catalog.Output{recordOf(wCommon, v3, t0), day5}, changed: true,
		},
		{
			name: "a newer file where the path needs a folder is kept", recs: []catalog.Output{rec("docs", ownerA, v5, 1)}, src: v3,
			desired: []planner.Desired{docsIdx, wDay3},
			items:   []planner.Item{create(wDay3, recordOf(wDay3, v3, now)), keptNewer(docsIdx, catalog.Output{})},
			next:    []catalog.Output{rec("docs", ownerA, v5, 1), recordOf(wDay3, v3, now)}, changed: true,
		},
		{
			name: "newer files below the path are kept", recs: []catalog.Output{rec("docs/index.txt", ownerA, v5, 1), rec("docs/x", ownerB, v5, 2)}, src: v3,
			desired: []planner.Desired{docs},
			items:   []planner.Item{keptNewer(docs, catalog.Output{})},
			next:    []catalog.Output{rec("docs/index.txt", ownerA, v5, 1), rec("docs/x", ownerB, v5, 2)},
		},
		{
			name: "an older version's output in the way is displaced", recs: []catalog.Output{rec("docs", ownerA, ver(1, 1), 1), day5}, src: v3,
			desired: []planner.Desired{docsIdx},
			items:   []planner.Item{displaced(rec("docs", ownerA, ver(1, 1), 1)), create(docsIdx, recordOf(docsIdx, v3, now))},
			next:    []catalog.Output{recordOf(docsIdx, v3, now), day5}, changed: true,
		},
		{
			name: "unmanaged content in the way of a kept path is no collision", recs: []catalog.Output{rec("docs/index.txt", ownerA, v5, 1)}, unmanaged: []string{"docs"}, src: v3,
			desired: []planner.Desired{docsIdx},
			items:   []planner.Item{keptNewer(docsIdx, rec("docs/index.txt", ownerA, v5, 1))},
			next:    []catalog.Output{rec("docs/index.txt", ownerA, v5, 1)},
		},
		{
			name: "a collision elsewhere still blocks", recs: []catalog.Output{common}, unmanaged: []string{"day-3.txt"}, src: v3,
			desired: []planner.Desired{wCommon, wDay3},
			items:   []planner.Item{keptNewer(wCommon, common), collision(wDay3)},
		},
		{
			name: "take ownership adopts beside the kept paths", recs: []catalog.Output{common}, unmanaged: []string{"day-3.txt"}, src: v3, take: true,
			desired: []planner.Desired{wCommon, wDay3},
			items: []planner.Item{keptNewer(wCommon, common), func() planner.Item {
				it := create(wDay3, recordOf(wDay3, v3, now))
				it.Adopted = true
				return it
			}()},
			next: []catalog.Output{common, recordOf(wDay3, v3, now)}, changed: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cat(tc.recs...)
			in := withSource(input(planner.Additive, c, storedOf(tc.recs, tc.unmanaged...), tc.desired...), tc.src)
			in.AllowOlder, in.DeleteLater, in.TakeOwnership = tc.older, tc.later, tc.take
			p := build(t, in)
			want := planner.Plan{Items: tc.items, Changed: tc.changed}
			switch {
			case tc.next == nil:
				for _, it := range tc.items {
					if it.Action == planner.Collision {
						want.Collisions = append(want.Collisions, it.Path)
					}
				}
			case tc.changed:
				want.Next = next(c, tc.next...)
			default:
				want.Next = c // unchanged: the catalog as it was read
			}
			assertPlan(t, p, want)
			// Kept paths are neither written nor deleted, and their records
			// stay exactly as they were.
			for _, it := range p.Items {
				if it.Action != planner.KeptNewer {
					continue
				}
				if slices.ContainsFunc(p.Writes(), func(w planner.Item) bool { return w.Path == it.Path }) || slices.Contains(p.Deletes(), it.Path) {
					t.Fatalf("kept %s is written or deleted", it.Path)
				}
				if old, ok := c.Lookup(it.Path); ok && p.Next != nil {
					if got, _ := p.Next.Lookup(it.Path); !reflect.DeepEqual(got, old) {
						t.Fatalf("kept %s's record changed: %s", it.Path, showRec(got))
					}
				}
			}
		})
	}
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
// with the newest version's records. Replacement: every version applied
// after a newer one is superseded (and changes nothing), every other one is
// planned. Additive: no version is superseded; each path ends as the newest
// version that desires it wrote it, and a version keeps (KeptNewer) exactly
// the paths a newer applied version wrote. Other owners' newer versions of
// the same source never interfere.
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
		// Per path, the newest version that desires it (additive's end state).
		newestAt := map[string]int{}
		for i, v := range vs {
			for _, d := range v.desired {
				if j, ok := newestAt[d.Path]; !ok || planner.Newer(v.src, vs[j].src) {
					newestAt[d.Path] = i
				}
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
			if wf == planner.Replacement && beatenBy != nil {
				if p.Superseded == nil || *p.Superseded != *beatenBy || p.Next != nil || p.Changed || p.Items != nil || p.Writes() != nil || p.Deletes() != nil {
					t.Fatalf("step %d: version %d after newer %s: plan\n%s superseded=%v", step, i, beatenBy.Digest, showPlan(p), p.Superseded)
				}
				continue
			}
			if p.Superseded != nil || p.Next == nil {
				t.Fatalf("step %d: version %d superseded by %+v; applied %v", step, i, p.Superseded, applied)
			}
			if wf == planner.Additive {
				// Kept: exactly the paths whose record a newer version wrote.
				idx := c.Index()
				for _, it := range p.Items {
					r, ok := idx[it.Path]
					newer := ok && r.Owner() == ownerA && planner.Newer(r.Source, vs[i].src)
					if (it.Action == planner.KeptNewer) != newer || newer && !reflect.DeepEqual(it.Record, r) {
						t.Fatalf("step %d: version %d plans %s %s over %s", step, i, it.Action, it.Path, showRec(r))
					}
				}
			}
			stored, c = apply(in, p)
			applied = append(applied, i)
		}

		// The newest version's outputs (additive: each path's newest
		// version's output) are recorded and stored as it wants.
		idx := c.Index()
		if wf == planner.Additive {
			for path, i := range newestAt {
				d := vs[i].desired[slices.IndexFunc(vs[i].desired, func(d planner.Desired) bool { return d.Path == path })]
				r, ok := idx[path]
				if !ok || r.Owner() != ownerA || r.Source != vs[i].src || r.SHA256 != d.SHA256 || stored[path].Size != d.Size {
					t.Fatalf("%s recorded as %s, want version %d", path, showRec(r), i)
				}
			}
		}
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
		var wantOwn []string
		if wf == planner.Replacement {
			for _, d := range vs[newestI].desired {
				wantOwn = append(wantOwn, d.Path)
			}
		} else {
			for path := range newestAt {
				wantOwn = append(wantOwn, path)
			}
		}
		sort.Strings(wantOwn)
		if !reflect.DeepEqual(own, wantOwn) {
			t.Fatalf("owner's records %q, want %q", own, wantOwn)
		}
		for _, o := range others {
			if r, ok := idx[o.Path]; !ok || !reflect.DeepEqual(r, o) {
				t.Fatalf("other owner's record %s changed: %s", o.Path, showRec(r))
			}
		}

		// Redelivering any version afterwards: the newest is a no-op; the
		// others are superseded by it (replacement) or change nothing
		// (additive: each path is the version's own or kept).
		for i := range vs {
			p, err := planner.Build(planner.Input{
				Owner: ownerA, Source: vs[i].src, Workflow: wf, Desired: vs[i].desired, Catalog: c,
				Stored: stored, Now: now.Add(time.Hour), DistributorVersion: "v2",
			})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case i == newestI || wf == planner.Additive:
				if p.Superseded != nil || p.Changed || p.Count(planner.Unchanged)+p.Count(planner.KeptNewer) != len(p.Items) {
					t.Fatalf("redelivered version %d: superseded %v changed %v\n%s", i, p.Superseded, p.Changed, showPlan(p))
				}
			case p.Superseded == nil || *p.Superseded != vs[newestI].src:
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

// Additive, one owner, several sources writing the same paths: whatever
// the arrival order (replays of old versions included), each path ends as
// the newest publication that desires it wrote it (Newer across sources:
// created, then digest, then source id), and replaying any publication
// afterwards changes nothing. Other owners' records stay unless a
// publication writes their path.
func TestAdditiveNewestWinsAcrossSources(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type publication struct {
			src     catalog.Source
			desired []planner.Desired
		}
		n := rapid.IntRange(2, 6).Draw(t, "publications")
		ids := []string{"weatherreporter.today", "weatherreporter.week", "weatherreporter.alerts"}
		pubs := make([]publication, n)
		seen := map[catalog.Source]bool{}
		for i := range pubs {
			// Few created times and digests, so that ties on both are
			// common; a drawn version that repeats another gets a digest
			// of its own.
			src := catalog.Source{
				ID:      rapid.SampledFrom(ids).Draw(t, fmt.Sprintf("id %d", i)),
				Digest:  dig(100 + rapid.IntRange(0, 1).Draw(t, fmt.Sprintf("digest %d", i))),
				Created: t0.Add(time.Duration(rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("created %d", i))) * time.Hour),
			}
			if seen[src] {
				src.Digest = dig(200 + i)
			}
			seen[src] = true
			pubs[i].src = src
			for _, p := range rapid.SliceOfNDistinct(rapid.SampledFrom(universe), 1, len(universe), rapid.ID[string]).Draw(t, fmt.Sprintf("paths %d", i)) {
				pubs[i].desired = append(pubs[i].desired, want(p, contentN.Draw(t, fmt.Sprintf("content %d %s", i, p))))
			}
		}
		// Per path, the newest publication that desires it.
		newestAt := map[string]int{}
		for i, pub := range pubs {
			for _, d := range pub.desired {
				if j, ok := newestAt[d.Path]; !ok || planner.Newer(pub.src, pubs[j].src) {
					newestAt[d.Path] = i
				}
			}
		}
		others := []catalog.Output{rec("zz/b", ownerB, ver(999, 100), 1), rec("a", ownerA2, ver(998, 100), 2)}

		// Two arrival orders, each every publication once plus replays.
		run := func(label string) (*catalog.Catalog, map[string]planner.Stored) {
			order := rapid.Permutation(seq(n)).Draw(t, label)
			order = append(order, rapid.SliceOfN(rapid.IntRange(0, n-1), 0, 4).Draw(t, label+" replays")...)
			c, stored := cat(others...), storedOf(others)
			for step, i := range order {
				in := planner.Input{
					Owner: ownerA, Source: pubs[i].src, Workflow: planner.Additive, Desired: pubs[i].desired, Catalog: c,
					Stored: stored, Now: now.Add(time.Duration(step) * time.Minute), DistributorVersion: "v2",
				}
				p, err := planner.Build(in)
				if err != nil || p.Next == nil || p.Superseded != nil {
					t.Fatalf("%s step %d (publication %d): err %v\n%s", label, step, i, err, showPlan(p))
				}
				stored, c = apply(in, p)
			}
			return c, stored
		}
		endA, storedA := run("order A")
		endB, storedB := run("order B")

		type state struct {
			owner          catalog.Owner
			source         catalog.Source
			sha256         string
			size, recorded int64
		}
		endState := func(c *catalog.Catalog, stored map[string]planner.Stored) map[string]state {
			m := map[string]state{}
			for _, o := range c.Outputs {
				m[o.Path] = state{owner: o.Owner(), source: o.Source, sha256: o.SHA256, size: stored[o.Path].Size, recorded: o.Size}
			}
			return m
		}
		a, b := endState(endA, storedA), endState(endB, storedB)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("end states differ by arrival order:\n%v\n%v", a, b)
		}
		for path, i := range newestAt {
			d := pubs[i].desired[slices.IndexFunc(pubs[i].desired, func(d planner.Desired) bool { return d.Path == path })]
			if got := a[path]; got.owner != ownerA || got.source != pubs[i].src || got.sha256 != d.SHA256 || got.size != d.Size {
				t.Fatalf("%s ends as %+v, want publication %d (%s %s)", path, got, i, pubs[i].src.ID, pubs[i].src.Created)
			}
		}
		for _, o := range others {
			if _, written := newestAt[o.Path]; !written && a[o.Path].owner != o.Owner() {
				t.Fatalf("other owner's %s ends as %+v", o.Path, a[o.Path])
			}
		}

		// A late replay of any publication changes nothing.
		for i, pub := range pubs {
			p, err := planner.Build(planner.Input{
				Owner: ownerA, Source: pub.src, Workflow: planner.Additive, Desired: pub.desired, Catalog: endA,
				Stored: storedA, Now: now.Add(time.Hour), DistributorVersion: "v2",
			})
			if err != nil || p.Changed || p.Count(planner.Unchanged)+p.Count(planner.KeptNewer) != len(p.Items) {
				t.Fatalf("replayed publication %d: err %v\n%s", i, err, showPlan(p))
			}
		}
	})
}
