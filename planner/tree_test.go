package planner_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// A folder tree cannot hold a file and a folder at one path: a stored
// object where a planned output needs a folder, or objects below a planned
// output's path, block the publication like a collision. (On S3 both keys
// could coexist; the rule is the same so that roots mirror each other.)
func TestStoredFileWhereFolderIsPlannedIsACollision(t *testing.T) {
	for _, wf := range []planner.Workflow{planner.Additive, planner.Replacement} {
		t.Run(string(wf), func(t *testing.T) {
			stored := map[string]planner.Stored{"sub": {Size: 1}, "deep/a/b": {Size: 1}}
			in := input(wf, nil, stored, want("sub/a.txt", 1), want("deep/a", 2), want("ok.txt", 3))
			p := build(t, in)
			if got, wantC := p.Collisions, []string{"deep/a", "sub/a.txt"}; !slices.Equal(got, wantC) {
				t.Fatalf("collisions = %q, want %q", got, wantC)
			}
			if !p.Blocked() || p.Next != nil || len(p.Writes()) != 0 {
				t.Fatalf("plan not blocked: next=%v writes=%d", p.Next, len(p.Writes()))
			}
		})
	}
}

func TestTakeOwnershipDoesNotAdoptAcrossFileAndFolder(t *testing.T) {
	in := input(planner.Additive, nil, map[string]planner.Stored{"sub": {Size: 1}}, want("sub/a.txt", 1))
	in.TakeOwnership = true
	if p := build(t, in); !slices.Equal(p.Collisions, []string{"sub/a.txt"}) {
		t.Fatalf("collisions = %q, want [sub/a.txt]", p.Collisions)
	}
}

func TestDesiredPathsThatNestAreAnError(t *testing.T) {
	for _, paths := range [][]string{{"a", "a/b"}, {"a", "a-c", "a/b"}, {"x/y", "x/y/z"}} {
		var ds []planner.Desired
		for i, p := range paths {
			ds = append(ds, want(p, i))
		}
		_, err := planner.Build(input(planner.Additive, nil, nil, ds...))
		if !errors.Is(err, planner.ErrPathConflict) {
			t.Errorf("%q: err = %v, want ErrPathConflict", paths, err)
		}
	}
	// Siblings sharing a name prefix are fine.
	if _, err := planner.Build(input(planner.Additive, nil, nil, want("a", 1), want("a-b/c", 2), want("ab", 3))); err != nil {
		t.Fatalf("siblings: %v", err)
	}
}

// displaced is the delete of a managed output in the way of a planned path.
func displaced(r catalog.Output) planner.Item {
	return planner.Item{Path: r.Path, Action: planner.Delete, Record: r, Displaced: true}
}

// A managed output in the way of a planned path (a file where a folder is
// needed, or files below a planned file) is displaced, whoever owns it and
// in both workflows: deleted before the writes, its record gone from the
// next catalog. It counts as a delete.
func TestManagedOutputInTheWayIsDisplaced(t *testing.T) {
	idx, more, docs := want("docs/index.txt", 2), want("docs/sub/more.txt", 3), want("docs", 4)
	abc, a := want("a/b/c", 5), want("a", 6)
	for _, tc := range []struct {
		name    string
		old     []catalog.Output
		desired []planner.Desired
		// items and next records, for each workflow
		items func(wf planner.Workflow, old []catalog.Output) []planner.Item
		next  func(wf planner.Workflow, old []catalog.Output) []catalog.Output
	}{
		{
			name: "file becomes folder", old: []catalog.Output{rec("docs", ownerA, srcOld, 1)}, desired: []planner.Desired{idx},
			items: func(_ planner.Workflow, old []catalog.Output) []planner.Item {
				return []planner.Item{displaced(old[0]), create(idx, written(idx, now))}
			},
			next: func(planner.Workflow, []catalog.Output) []catalog.Output { return []catalog.Output{written(idx, now)} },
		},
		{
			name: "folder becomes file", old: []catalog.Output{rec("docs/index.txt", ownerA, srcOld, 1), rec("docs/sub/more.txt", ownerA, srcOld, 2)},
			desired: []planner.Desired{docs},
			items: func(_ planner.Workflow, old []catalog.Output) []planner.Item {
				return []planner.Item{create(docs, written(docs, now)), displaced(old[0]), displaced(old[1])}
			},
			next: func(planner.Workflow, []catalog.Output) []catalog.Output { return []catalog.Output{written(docs, now)} },
		},
		{
			name: "another owner's file becomes our folder", old: []catalog.Output{rec("docs", ownerB, srcB, 1), rec("gone.txt", ownerA, srcOld, 2)},
			desired: []planner.Desired{idx, more},
			items: func(wf planner.Workflow, old []catalog.Output) []planner.Item {
				items := []planner.Item{displaced(old[0]), create(idx, written(idx, now)), create(more, written(more, now))}
				if wf == planner.Replacement {
					items = append(items, del(old[1]))
				}
				return items
			},
			next: func(wf planner.Workflow, old []catalog.Output) []catalog.Output {
				if wf == planner.Replacement {
					return []catalog.Output{written(idx, now), written(more, now)}
				}
				return []catalog.Output{written(idx, now), written(more, now), old[1]}
			},
		},
		{
			name: "another owner's folder becomes our file", old: []catalog.Output{rec("docs/index.txt", ownerB, srcB, 1), rec("docs/x", ownerA2, srcOld, 2)},
			desired: []planner.Desired{docs},
			items: func(_ planner.Workflow, old []catalog.Output) []planner.Item {
				return []planner.Item{create(docs, written(docs, now)), displaced(old[0]), displaced(old[1])}
			},
			next: func(planner.Workflow, []catalog.Output) []catalog.Output { return []catalog.Output{written(docs, now)} },
		},
		{
			name: "nested several levels: file a becomes a/b/c", old: []catalog.Output{rec("a", ownerA, srcOld, 1), rec("a-b", ownerA, srcOld, 2)},
			desired: []planner.Desired{abc, want("a-b", 2)},
			items: func(wf planner.Workflow, old []catalog.Output) []planner.Item {
				ab := want("a-b", 2)
				r := written(ab, t0)
				return []planner.Item{displaced(old[0]), update(ab, r, false), create(abc, written(abc, now))}
			},
			next: func(planner.Workflow, []catalog.Output) []catalog.Output {
				return []catalog.Output{written(want("a-b", 2), t0), written(abc, now)}
			},
		},
		{
			name: "nested several levels: a/b/c becomes file a", old: []catalog.Output{rec("a/b/c", ownerA, srcOld, 1), rec("a/b/d", ownerB, srcB, 2)},
			desired: []planner.Desired{a},
			items: func(_ planner.Workflow, old []catalog.Output) []planner.Item {
				return []planner.Item{create(a, written(a, now)), displaced(old[0]), displaced(old[1])}
			},
			next: func(planner.Workflow, []catalog.Output) []catalog.Output { return []catalog.Output{written(a, now)} },
		},
	} {
		for _, wf := range bothWorkflows {
			t.Run(tc.name+"/"+string(wf), func(t *testing.T) {
				c := cat(tc.old...)
				in := input(wf, c, storedOf(tc.old), tc.desired...)
				p := build(t, in)
				assertPlan(t, p, planner.Plan{Items: tc.items(wf, tc.old), Next: next(c, tc.next(wf, tc.old)...), Changed: true})

				var wantDisplaced []string
				for _, it := range p.Items {
					if it.Displaced {
						wantDisplaced = append(wantDisplaced, it.Path)
					}
				}
				if got := p.Displaced(); len(got) == 0 || !slices.Equal(got, wantDisplaced) {
					t.Fatalf("Displaced() = %q, want %q", got, wantDisplaced)
				}
				for _, d := range p.Displaced() {
					if !slices.Contains(p.Deletes(), d) {
						t.Fatalf("Deletes() = %q lacks displaced %q", p.Deletes(), d)
					}
				}
				// Executed deletes first, the root is a tree again.
				stored, _ := apply(in, p)
				assertTree(t, stored)
			})
		}
	}
}

// assertTree fails when one stored path is a folder of another.
func assertTree(t *testing.T, stored map[string]planner.Stored) {
	t.Helper()
	keys := slices.Sorted(maps.Keys(stored))
	for _, a := range keys {
		for _, b := range keys {
			if strings.HasPrefix(b, a+"/") {
				t.Fatalf("after the plan, %q is a file and a folder (%q)", a, b)
			}
		}
	}
}

// A record whose bytes are missing is still in the way of the tree the
// catalog describes: it is displaced too (the delete finds nothing).
func TestRecordWithoutBytesInTheWayIsDisplaced(t *testing.T) {
	old := rec("docs", ownerA, srcOld, 1)
	idx := want("docs/index.txt", 2)
	c := cat(old)
	p := build(t, input(planner.Additive, c, nil, idx))
	assertPlan(t, p, planner.Plan{Items: []planner.Item{displaced(old), create(idx, written(idx, now))}, Next: next(c, written(idx, now)), Changed: true})
}

// Unmanaged content in the way blocks the planned path, with
// --take-ownership too; partially managed folders as well. The collision
// names what is in the way, and nothing (not even the managed part) is
// deleted.
func TestUnmanagedContentInTheWayIsACollision(t *testing.T) {
	mine := rec("docs/a.txt", ownerA, srcOld, 1)
	for _, tc := range []struct {
		name      string
		old       []catalog.Output
		unmanaged []string
		desired   planner.Desired
		inTheWay  []string
	}{
		{"unmanaged file where a folder is needed", nil, []string{"docs"}, want("docs/index.txt", 2), []string{"docs"}},
		{"unmanaged file several levels up", nil, []string{"a"}, want("a/b/c", 2), []string{"a"}},
		{"unmanaged folder where a file is needed", nil, []string{"docs/x.txt", "docs/y/z.txt"}, want("docs", 2), []string{"docs/x.txt", "docs/y/z.txt"}},
		{"partially managed folder", []catalog.Output{mine}, []string{"docs/b.txt"}, want("docs", 2), []string{"docs/b.txt"}},
	} {
		for _, wf := range bothWorkflows {
			for _, take := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/take-ownership=%v", tc.name, wf, take), func(t *testing.T) {
					c := cat(tc.old...)
					in := input(wf, c, storedOf(tc.old, tc.unmanaged...), tc.desired)
					in.TakeOwnership = take
					p := build(t, in)
					wantItem := collision(tc.desired)
					wantItem.InTheWay = tc.inTheWay
					items := []planner.Item{wantItem}
					if len(tc.old) > 0 && wf == planner.Replacement {
						items = append(items, del(mine)) // not desired: an ordinary replacement delete
					}
					assertPlan(t, p, planner.Plan{Items: items, Collisions: []string{tc.desired.Path}})
					if p.Displaced() != nil || p.Deletes() != nil || p.Writes() != nil {
						t.Fatalf("blocked plan acts: displaced %q deletes %q writes %d", p.Displaced(), p.Deletes(), len(p.Writes()))
					}
				})
			}
		}
	}
}

// Displaced deletes count toward max_deletes.
func TestDisplacedDeletesCountTowardMaxDeletes(t *testing.T) {
	old := []catalog.Output{rec("docs/a", ownerA, srcOld, 1), rec("docs/b", ownerA, srcOld, 2)}
	for _, wf := range bothWorkflows {
		in := input(wf, cat(old...), storedOf(old), want("docs", 3))
		in.MaxDeletes = 1
		if _, err := planner.Build(in); !errors.Is(err, planner.ErrTooManyDeletes) {
			t.Fatalf("%s: err = %v, want ErrTooManyDeletes", wf, err)
		}
		in.MaxDeletes = 2
		build(t, in)
	}
}

// A legacy first run treats the root's content as the earlier version's
// output (replacement clears it, additive overwrites planned paths), so
// legacy content in the way is displaced rather than blocking the only
// run that could ever write a catalog. It is removed before the writes,
// not cleared after them.
func TestLegacyContentInTheWayIsDisplaced(t *testing.T) {
	idx, docs := want("docs/index.txt", 1), want("b", 2)
	for _, wf := range bothWorkflows {
		t.Run(string(wf), func(t *testing.T) {
			in := input(wf, nil, storedOf(nil, "docs", "b/old.txt", "left.txt"), idx, docs)
			in.Legacy = true
			p := build(t, in)
			want := planner.Plan{
				Items: []planner.Item{create(docs, written(docs, now)), {Path: "b/old.txt", Action: planner.Delete, Displaced: true},
					{Path: "docs", Action: planner.Delete, Displaced: true}, create(idx, written(idx, now))},
				Next: fresh(written(docs, now), written(idx, now)), Changed: true,
			}
			if wf == planner.Replacement {
				want.Clear = []string{"left.txt"}
			}
			assertPlan(t, p, want)
			if got := p.Displaced(); !slices.Equal(got, []string{"b/old.txt", "docs"}) {
				t.Fatalf("Displaced() = %q", got)
			}
			stored, _ := apply(in, p)
			assertTree(t, stored)
		})
	}
}
