package service

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
)

// The published event lists every changed output: bytes written, records
// updated in place without a write (new source identity for the same
// bytes), deleted, and names adopted paths.
func TestFillCountsListsWrittenUpdatedDeletedAndAdopted(t *testing.T) {
	t.Parallel()
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

// The event's source is the published one, not that of a deleted record
// (in path order a delete may come first).
func TestFillCountsSourceIsNotADeletedRecords(t *testing.T) {
	t.Parallel()
	older := catalog.Source{ID: "w", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001"}
	newer := catalog.Source{ID: "w", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000002"}
	res := engine.Result{Plan: planner.Plan{Items: []planner.Item{
		{Path: "a.csv", Action: planner.Delete, Record: catalog.Output{Path: "a.csv", Source: older}},
		{Path: "b.csv", Action: planner.Create, Write: true, Record: catalog.Output{Path: "b.csv", Source: newer}},
	}}}
	var r events.Result
	fillCounts(&r, res)
	if r.Source == nil || r.Source.Digest != newer.Digest {
		t.Fatalf("source %+v, want the published %s", r.Source, newer.Digest)
	}
}

// An older additive bundle is published with the paths a newer version
// wrote counted as kept_newer; its source is the bundle's, not the newer
// version's the kept records hold, even when it kept every path.
func TestResultEventOfOlderAdditiveBundle(t *testing.T) {
	t.Parallel()
	older := catalog.Source{ID: "w", Digest: "sha256:" + strings.Repeat("1", 64), Created: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)}
	newer := catalog.Source{ID: "w", Digest: "sha256:" + strings.Repeat("2", 64), Created: older.Created.Add(time.Hour)}
	kept := planner.Item{Path: "a.csv", Action: planner.KeptNewer, Record: catalog.Output{Path: "a.csv", Source: newer}}
	written := planner.Item{Path: "b.csv", Action: planner.Create, Write: true,
		Record: catalog.Output{Path: "b.csv", Source: older, SHA256: "sha256:" + strings.Repeat("b", 64), Size: 3}}
	ev := events.BundleReady{ID: "ev1", PipelineID: "p"}
	for _, tc := range []struct {
		name string
		res  engine.Result
	}{
		{"some written", engine.Result{KeptNewer: 1, Written: []planner.Item{written}, Plan: planner.Plan{Source: older, Items: []planner.Item{kept, written}}}},
		{"every path kept", engine.Result{KeptNewer: 1, Plan: planner.Plan{Source: older, Items: []planner.Item{kept}}}},
	} {
		r := ResultEvent("d", tc.res, nil, Delivery{Event: ev, Attempt: 1})
		if r.Type != events.TypePublished || r.KeptNewer != 1 || r.Written != len(tc.res.Written) ||
			r.Source == nil || *r.Source != (events.SourceRef{ID: "w", Digest: older.Digest, Created: older.Created}) {
			t.Fatalf("%s: result %+v, source %+v", tc.name, r, r.Source)
		}
		r.SchemaVersion, r.ID, r.Time = events.SchemaVersion, "ev1.d.published", time.Now()
		if err := r.Validate(); err != nil {
			t.Fatalf("%s: published event does not validate: %v", tc.name, err)
		}
	}
}

// A superseded destination gets a superseded event naming both versions:
// terminal, not a failure, nothing to replay.
func TestResultEventSuperseded(t *testing.T) {
	t.Parallel()
	lost := catalog.Source{ID: "w", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001"}
	won := catalog.Source{ID: "w", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000002"}
	err := &engine.SupersededError{Root: "/r", Owner: catalog.Owner{PipelineID: "p", DestinationID: "d"}, Source: lost, By: won}
	ev := events.BundleReady{ID: "ev1", PipelineID: "p"}
	r := ResultEvent("d", engine.Result{Plan: planner.Plan{Superseded: &won}}, err, Delivery{Event: ev, Attempt: 1})
	if r.Type != events.TypeSuperseded || r.Reason != "" || r.Original != nil ||
		r.Source == nil || *r.Source != (events.SourceRef{ID: "w", Digest: lost.Digest}) ||
		r.SupersededBy == nil || *r.SupersededBy != (events.SourceRef{ID: "w", Digest: won.Digest}) ||
		r.BundleEventID != "ev1" || r.DestinationID != "d" || r.Written+r.Deleted+r.Unchanged != 0 {
		t.Fatalf("result %+v", r)
	}
	r.SchemaVersion, r.ID, r.Time = events.SchemaVersion, "ev1.d.superseded", time.Now()
	if err := r.Validate(); err != nil {
		t.Fatalf("superseded event does not validate: %v", err)
	}
}

// A run nobody announced (apply) reports like a first delivery of the
// equivalent bundle-ready event: a failure carries that event, with the
// opened bundle's digest, so that it can be replayed through serve.
func TestResultEventOfDirectRun(t *testing.T) {
	t.Parallel()
	digest := "sha256:" + strings.Repeat("c", 64)
	req := Request{PipelineID: "p", Bundle: "/b", Destinations: []string{"d"}, BundleEventID: "apply.1", TakeOwnership: true}
	d := req.Direct(digest)
	if d.Attempt != 1 || d.Exhausted {
		t.Fatalf("delivery %+v, want the first and not exhausted", d)
	}
	r := ResultEvent("d", engine.Result{}, errors.New("boom"), d)
	want := events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: "apply.1",
		PipelineID: "p", Bundle: "/b", ManifestDigest: digest, Destinations: []string{"d"}, TakeOwnership: true}
	if r.Type != events.TypeFailed || r.BundleEventID != "apply.1" || r.PipelineID != "p" || r.Attempts != 1 ||
		r.Original == nil || !reflect.DeepEqual(*r.Original, want) {
		t.Fatalf("result %+v, original %+v; want failed, attempt 1, original %+v", r, r.Original, want)
	}
}
