package planner_test

import (
	"testing"

	"github.com/distributor/distributor/planner"
)

// A retired stored object (Stored.Retired) is no unmanaged content: a
// desired path on it is a create without a collision (not an adoption),
// and one in the way of a desired file or folder is displaced; the same
// objects not retired block the plan.
func TestRetiredObjectsAreNoCollision(t *testing.T) {
	for _, wf := range bothWorkflows {
		for _, retired := range []bool{true, false} {
			in := planner.Input{Owner: ownerA, Source: srcNew, Workflow: wf, Now: now,
				Catalog: cat(rec("keep.txt", ownerA, srcOld, 1)),
				Desired: []planner.Desired{want("keep.txt", 1), want("app.js", 2), want("docs/index.html", 3), want("api", 4)},
				Stored: map[string]planner.Stored{"keep.txt": {Size: 1}, "app.js": {Size: 9, Retired: retired},
					"docs": {Size: 5, Retired: retired}, "api/v1.html": {Size: 6, Retired: retired}}}
			p, err := planner.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if !retired {
				if got := p.Collisions; len(got) != 3 {
					t.Errorf("%s, not retired: collisions %q, want app.js, api and docs/index.html", wf, got)
				}
				continue
			}
			it, _ := itemOf(p, "app.js")
			if p.Blocked() || it.Action != planner.Create || !it.Write || it.Adopted {
				t.Errorf("%s: blocked %v (%q), app.js %+v", wf, p.Blocked(), p.Collisions, it)
			}
			if got := p.Displaced(); len(got) != 2 || got[0] != "api/v1.html" || got[1] != "docs" {
				t.Errorf("%s: displaced %q, want [api/v1.html docs]", wf, got)
			}
		}
	}
}

func itemOf(p planner.Plan, path string) (planner.Item, bool) {
	for _, it := range p.Items {
		if it.Path == path {
			return it, true
		}
	}
	return planner.Item{}, false
}
