package planner_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

var (
	t0  = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC) // when the fixture's records were written
	now = time.Date(2026, 6, 20, 8, 30, 0, 0, time.UTC) // the publication being planned

	ownerA  = catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"}
	ownerB  = catalog.Owner{PipelineID: "tides.hourly", DestinationID: "latest-html"}
	ownerA2 = catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "weather-archive"} // same pipeline, other destination

	srcOld = catalog.Source{ID: "weatherreporter.today", Digest: dig(1000), Created: t0.Add(-time.Hour)}
	srcNew = catalog.Source{ID: "weatherreporter.tomorrow", Digest: dig(1001), Created: now.Add(-time.Hour)}

	bothWorkflows = []planner.Workflow{planner.Additive, planner.Replacement}
)

// dig is a valid digest standing for content n.
func dig(n int) string { return fmt.Sprintf("sha256:%064x", n) }

// rec is a source record for content n (sha dig(n), size n) written at t0.
func rec(path string, o catalog.Owner, s catalog.Source, n int) catalog.Output {
	return catalog.Output{
		Path: path, PipelineID: o.PipelineID, DestinationID: o.DestinationID, Source: s,
		Kind: catalog.KindSource, SHA256: dig(n), Size: int64(n), CreatedAt: t0, UpdatedAt: t0,
	}
}

// want is a desired source output of content n.
func want(path string, n int) planner.Desired {
	return planner.Desired{Path: path, From: path, Kind: catalog.KindSource, SHA256: dig(n), Size: int64(n)}
}

// written is the record ownerA's publication of srcNew at now gives d.
func written(d planner.Desired, createdAt time.Time) catalog.Output {
	o := catalog.Output{
		Path: d.Path, PipelineID: ownerA.PipelineID, DestinationID: ownerA.DestinationID, Source: srcNew,
		Kind: d.Kind, SHA256: d.SHA256, Size: d.Size, URL: d.URL, CreatedAt: createdAt, UpdatedAt: now,
	}
	if d.Kind == catalog.KindGenerated {
		o.SourcePath, o.Transform = d.From, d.Transform
	}
	return o
}

func cat(outs ...catalog.Output) *catalog.Catalog {
	c := &catalog.Catalog{DistributorVersion: "v1", CreatedAt: t0.Add(-48 * time.Hour), UpdatedAt: t0, Outputs: outs}
	c.Sort()
	return c
}

// next is c after a changing plan: same outputs as given, updated at now.
func next(c *catalog.Catalog, outs ...catalog.Output) *catalog.Catalog {
	n := &catalog.Catalog{DistributorVersion: "v2", CreatedAt: c.CreatedAt, UpdatedAt: now, Outputs: outs}
	n.Sort()
	return n
}

// fresh is a brand-new catalog created by this publication.
func fresh(outs ...catalog.Output) *catalog.Catalog {
	n := &catalog.Catalog{DistributorVersion: "v2", CreatedAt: now, UpdatedAt: now, Outputs: outs}
	n.Sort()
	return n
}

// storedOf lists the records' objects with their recorded sizes, plus
// unmanaged objects of size 5.
func storedOf(recs []catalog.Output, unmanaged ...string) map[string]planner.Stored {
	m := map[string]planner.Stored{}
	for _, r := range recs {
		m[r.Path] = planner.Stored{Size: r.Size}
	}
	for _, p := range unmanaged {
		m[p] = planner.Stored{Size: 5}
	}
	return m
}

func input(wf planner.Workflow, c *catalog.Catalog, stored map[string]planner.Stored, desired ...planner.Desired) planner.Input {
	return planner.Input{
		Owner: ownerA, Source: srcNew, Workflow: wf, Desired: desired, Catalog: c,
		Stored: stored, Now: now, DistributorVersion: "v2",
	}
}

func create(d planner.Desired, r catalog.Output) planner.Item {
	return planner.Item{Path: d.Path, Action: planner.Create, Write: true, Desired: &d, Record: r}
}

func update(d planner.Desired, r catalog.Output, write bool) planner.Item {
	return planner.Item{Path: d.Path, Action: planner.Update, Write: write, Desired: &d, Record: r}
}

func unchanged(d planner.Desired, r catalog.Output) planner.Item {
	return planner.Item{Path: d.Path, Action: planner.Unchanged, Desired: &d, Record: r}
}

func del(r catalog.Output) planner.Item {
	return planner.Item{Path: r.Path, Action: planner.Delete, Record: r}
}

func collision(d planner.Desired) planner.Item {
	return planner.Item{Path: d.Path, Action: planner.Collision, Desired: &d}
}

func build(t *testing.T, in planner.Input) planner.Plan {
	t.Helper()
	p, err := planner.Build(in)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

// assertPlan compares everything a caller acts on.
func assertPlan(t *testing.T, got, want planner.Plan) {
	t.Helper()
	want.Owner, want.Source, want.Workflow = got.Owner, got.Source, got.Workflow
	if !reflect.DeepEqual(normPlan(got), normPlan(want)) {
		t.Fatalf("plan differs\n got: %s\nwant: %s", showPlan(got), showPlan(want))
	}
}

func normPlan(p planner.Plan) planner.Plan {
	if p.Next != nil && len(p.Next.Outputs) == 0 {
		n := *p.Next
		n.Outputs = nil
		p.Next = &n
	}
	return p
}

func showPlan(p planner.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "changed=%v collisions=%q clear=%q\n", p.Changed, p.Collisions, p.Clear)
	for _, it := range p.Items {
		fmt.Fprintf(&b, "  item %s %s write=%v adopted=%v desired=%+v\n    record=%s\n", it.Action, it.Path, it.Write, it.Adopted, it.Desired, showRec(it.Record))
	}
	if p.Next == nil {
		b.WriteString("  next=nil\n")
		return b.String()
	}
	fmt.Fprintf(&b, "  next version=%q created=%s updated=%s\n", p.Next.DistributorVersion, p.Next.CreatedAt, p.Next.UpdatedAt)
	for _, o := range p.Next.Outputs {
		fmt.Fprintf(&b, "    %s\n", showRec(o))
	}
	return b.String()
}

func showRec(o catalog.Output) string {
	if o.Path == "" {
		return "-"
	}
	return fmt.Sprintf("%s owner=%s src=%s kind=%s sp=%q tr=%q sha=…%s size=%d url=%q created=%s updated=%s",
		o.Path, o.Owner(), o.Source.ID, o.Kind, o.SourcePath, o.Transform, o.SHA256[len(o.SHA256)-4:], o.Size, o.URL,
		o.CreatedAt.Format(time.RFC3339), o.UpdatedAt.Format(time.RFC3339))
}

// apply executes a plan against a model of the root: what storage and the
// catalog look like afterwards.
func apply(in planner.Input, p planner.Plan) (map[string]planner.Stored, *catalog.Catalog) {
	stored := make(map[string]planner.Stored, len(in.Stored))
	for k, v := range in.Stored {
		stored[k] = v
	}
	for _, path := range p.Deletes() {
		delete(stored, path)
	}
	for _, it := range p.Writes() {
		stored[it.Path] = planner.Stored{Size: it.Desired.Size}
	}
	return stored, p.Next
}
