package planner_test

import (
	"errors"
	"slices"
	"testing"

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
