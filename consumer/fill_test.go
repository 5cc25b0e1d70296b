package consumer

import (
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
)

// The published event lists every changed output: bytes written, records
// updated in place without a write (new source identity for the same
// bytes), deleted, and names adopted paths.
func TestFillCountsListsWrittenUpdatedDeletedAndAdopted(t *testing.T) {
	src := catalog.Source{ID: "weatherreporter.tomorrow", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001"}
	rec := func(p string) catalog.Output {
		return catalog.Output{Path: p, Source: src, SHA256: "sha256:aa", Size: 3, URL: "https://x/" + p}
	}
	res := engine.Result{
		Written:   []planner.Item{{Path: "a.html", Record: rec("a.html")}, {Path: "b.csv", Record: rec("b.csv"), Adopted: true}},
		Updated:   []planner.Item{{Path: "c.md", Record: rec("c.md")}},
		Deleted:   []string{"old.csv"},
		Unchanged: 4,
		Plan:      planner.Plan{Items: []planner.Item{{Path: "a.html", Record: rec("a.html")}}},
	}
	var r events.Result
	fillCounts(&r, res)
	if r.Written != 2 || r.Updated != 1 || r.Deleted != 1 || r.Unchanged != 4 {
		t.Fatalf("counts written %d updated %d deleted %d unchanged %d", r.Written, r.Updated, r.Deleted, r.Unchanged)
	}
	var got []string
	for _, o := range r.Outputs {
		got = append(got, o.Action+" "+o.Path)
	}
	want := []string{"written a.html", "written b.csv", "updated c.md", "deleted old.csv"}
	if len(got) != len(want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("outputs %q, want %q", got, want)
		}
	}
	if len(r.Adopted) != 1 || r.Adopted[0] != "b.csv" {
		t.Fatalf("adopted %q, want [b.csv]", r.Adopted)
	}
	if r.Source == nil || r.Source.ID != src.ID {
		t.Fatalf("source %+v", r.Source)
	}
}
