package planner_test

// One test per rule of the catalog and workflow semantics (docs/catalog.md)
// named after the rule, run for every workflow the rule
// covers. Each asserts the exact items, collisions, clear set, next catalog
// and Changed flag.

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

var srcB = catalog.Source{ID: "tides.now", Digest: dig(2000), Created: t0.Add(-2 * time.Hour)}

// The shared fixture: ownerA has two records, ownerB one, and ownerA2 (same
// pipeline, other destination) one.
var (
	aIndex = rec("a/index.html", ownerA, srcOld, 10)
	aOld   = rec("a/old.html", ownerA, srcOld, 11)
	bIndex = rec("b/index.html", ownerB, srcB, 20)
	shared = rec("shared.css", ownerA2, srcOld, 30)
	all    = []catalog.Output{aIndex, aOld, bIndex, shared}
)

func forEachWorkflow(t *testing.T, f func(t *testing.T, wf planner.Workflow)) {
	for _, wf := range bothWorkflows {
		t.Run(string(wf), func(t *testing.T) { f(t, wf) })
	}
}

func paths(items []planner.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Path)
	}
	return out
}

func TestReplacementDeletesOwnersUnplannedOutputs(t *testing.T) {
	c := cat(all...)
	idx, fresh := want("a/index.html", 12), want("a/new.html", 13)
	p := build(t, input(planner.Replacement, c, storedOf(all, "notes.txt"), idx, fresh))
	assertPlan(t, p, planner.Plan{
		Items: []planner.Item{
			update(idx, written(idx, t0), true),
			create(fresh, written(fresh, now)),
			del(aOld),
		},
		Next:    next(c, written(idx, t0), written(fresh, now), bIndex, shared),
		Changed: true,
	})
	if got := p.Deletes(); !reflect.DeepEqual(got, []string{"a/old.html"}) {
		t.Fatalf("Deletes = %q", got)
	}
	if got := paths(p.Writes()); !reflect.DeepEqual(got, []string{"a/index.html", "a/new.html"}) {
		t.Fatalf("Writes = %q", got)
	}
	if p.Count(planner.Create) != 1 || p.Count(planner.Update) != 1 || p.Count(planner.Delete) != 1 || p.Count(planner.Unchanged) != 0 {
		t.Fatalf("counts: create %d update %d delete %d", p.Count(planner.Create), p.Count(planner.Update), p.Count(planner.Delete))
	}
}

func TestAdditiveRetainsUnplannedManagedOutputs(t *testing.T) {
	c := cat(all...)
	idx, fresh := want("a/index.html", 12), want("a/new.html", 13)
	p := build(t, input(planner.Additive, c, storedOf(all, "notes.txt"), idx, fresh))
	assertPlan(t, p, planner.Plan{
		Items: []planner.Item{
			update(idx, written(idx, t0), true),
			create(fresh, written(fresh, now)),
		},
		Next:    next(c, written(idx, t0), written(fresh, now), aOld, bIndex, shared),
		Changed: true,
	})
	if got := p.Deletes(); got != nil {
		t.Fatalf("additive Deletes = %q, want none", got)
	}
}

// Records of other owners, including the same pipeline's other destination,
// are outside the owner's scope.
func TestReplacementKeepsOtherOwnersRecords(t *testing.T) {
	assertOtherOwnersKept(t, planner.Replacement, []planner.Item{del(aIndex), del(aOld)})
}

func TestAdditiveRetainsOtherOwnersOutputs(t *testing.T) {
	assertOtherOwnersKept(t, planner.Additive, nil)
}

func assertOtherOwnersKept(t *testing.T, wf planner.Workflow, deletes []planner.Item) {
	c := cat(all...)
	d := want("c/page.html", 40)
	p := build(t, input(wf, c, storedOf(all), d))
	items := append([]planner.Item{create(d, written(d, now))}, deletes...)
	kept := []catalog.Output{written(d, now), bIndex, shared}
	if wf == planner.Additive {
		kept = append(kept, aIndex, aOld)
	}
	assertPlan(t, p, planner.Plan{Items: sortItems(items), Next: next(c, kept...), Changed: true})
	for _, o := range []catalog.Output{bIndex, shared} {
		if got, ok := p.Next.Lookup(o.Path); !ok || !reflect.DeepEqual(got, o) {
			t.Fatalf("%s's record changed: %s", o.Owner(), showRec(got))
		}
	}
}

func sortItems(items []planner.Item) []planner.Item {
	out := append([]planner.Item(nil), items...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Path < out[i].Path {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// A planned path managed by another owner is overwritten; the record changes
// owner in place, keeps created_at, and keeps no history of the old owner.
func TestPlannedPathManagedByOtherOwnerIsTakenOverKeepingCreatedAt(t *testing.T) {
	bCreated := t0.Add(-72 * time.Hour)
	old := rec("b/index.html", ownerB, srcB, 20)
	old.CreatedAt = bCreated
	bOther := rec("b/other.html", ownerB, srcB, 21)
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		for _, tc := range []struct {
			name  string
			d     planner.Desired
			write bool
		}{
			{"same bytes", want("b/index.html", 20), false},
			{"new bytes", want("b/index.html", 22), true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := cat(old, bOther)
				p := build(t, input(wf, c, storedOf(c.Outputs), tc.d))
				rec := written(tc.d, bCreated)
				assertPlan(t, p, planner.Plan{
					Items:   []planner.Item{update(tc.d, rec, tc.write)},
					Next:    next(c, rec, bOther),
					Changed: true,
				})
			})
		}
	})
}

func TestUnmanagedPathCollisionBlocksWholePublication(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		t.Run("beside a catalog", func(t *testing.T) {
			c := cat(all...)
			notes, idx, fresh := want("notes.txt", 40), want("a/index.html", 12), want("a/new.html", 13)
			p := build(t, input(wf, c, storedOf(all, "notes.txt", "other.txt"), notes, idx, fresh))
			items := []planner.Item{update(idx, written(idx, t0), true), create(fresh, written(fresh, now)), collision(notes)}
			if wf == planner.Replacement {
				items = append(items, del(aOld))
			}
			assertPlan(t, p, planner.Plan{Items: sortItems(items), Collisions: []string{"notes.txt"}})
			if !p.Blocked() || p.Writes() != nil || p.Deletes() != nil {
				t.Fatalf("blocked=%v writes=%v deletes=%v: a blocked plan must do nothing", p.Blocked(), p.Writes(), p.Deletes())
			}
		})
		t.Run("no catalog yet", func(t *testing.T) {
			taken, free := want("index.html", 40), want("other.html", 41)
			p := build(t, input(wf, nil, storedOf(nil, "index.html", "old.html"), taken, free))
			assertPlan(t, p, planner.Plan{
				Items:      []planner.Item{collision(taken), create(free, written(free, now))},
				Collisions: []string{"index.html"},
			})
		})
	})
}

func TestUnplannedUnmanagedContentIsLeftAlone(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		c := cat(aIndex)
		idx := want("a/index.html", 10)
		in := input(wf, c, storedOf(c.Outputs, "notes.txt", "a/stray.html"), idx)
		in.Source = srcOld
		p := build(t, in)
		assertPlan(t, p, planner.Plan{Items: []planner.Item{unchanged(idx, aIndex)}, Next: c, Changed: false})
	})
}

func TestRedeliveryIsNoOp(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		r1, r2 := rec("a/index.html", ownerA, srcNew, 10), rec("a/page.html", ownerA, srcNew, 11)
		c := cat(r1, r2, bIndex)
		d1, d2 := want("a/index.html", 10), want("a/page.html", 11)
		p := build(t, input(wf, c, storedOf(c.Outputs), d1, d2))
		// Next is the input catalog: same version, same updated_at.
		assertPlan(t, p, planner.Plan{Items: []planner.Item{unchanged(d1, r1), unchanged(d2, r2)}, Next: c, Changed: false})
		if p.Writes() != nil || p.Deletes() != nil {
			t.Fatalf("a no-op plan writes %v and deletes %v", p.Writes(), p.Deletes())
		}
	})
}

// The same event delivered again after a complete run changes nothing, even
// at a later time.
func TestRedeliveryAfterApplyIsNoOp(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		c := cat(all...)
		in := input(wf, c, storedOf(all), want("a/index.html", 12), want("a/new.html", 13))
		first := build(t, in)
		in.Stored, in.Catalog = apply(in, first)
		in.Now = now.Add(time.Hour)
		again := build(t, in)
		if again.Changed || again.Writes() != nil || again.Deletes() != nil || !reflect.DeepEqual(again.Next, first.Next) {
			t.Fatalf("redelivery is not a no-op:\n%s", showPlan(again))
		}
		if again.Count(planner.Unchanged) != 2 || len(again.Items) != 2 {
			t.Fatalf("want 2 unchanged items:\n%s", showPlan(again))
		}
	})
}

func TestBytesRewrittenOnlyWhenShaDiffersOrObjectMissingOrSizeDiffers(t *testing.T) {
	r := rec("r.bin", ownerA, srcNew, 10)
	empty := rec("empty.txt", ownerA, srcNew, 0)
	withURL := want("r.bin", 10)
	withURL.URL = "https://reports.example.com/r.bin"
	sameShaBigger := want("r.bin", 10)
	sameShaBigger.Size = 12
	cases := []struct {
		name   string
		d      planner.Desired
		stored map[string]planner.Stored
		action planner.Action
		write  bool
	}{
		{"same sha, object present with its size", want("r.bin", 10), storedOf([]catalog.Output{r}), planner.Unchanged, false},
		{"sha differs", planner.Desired{Path: "r.bin", From: "r.bin", Kind: catalog.KindSource, SHA256: dig(11), Size: 10}, storedOf([]catalog.Output{r}), planner.Update, true},
		{"object missing", want("r.bin", 10), map[string]planner.Stored{}, planner.Update, true},
		{"empty object missing", want("empty.txt", 0), map[string]planner.Stored{}, planner.Update, true},
		{"stored object has another size", want("r.bin", 10), map[string]planner.Stored{"r.bin": {Size: 9}}, planner.Update, true},
		{"desired size differs from the stored one", sameShaBigger, storedOf([]catalog.Output{r}), planner.Update, true},
		{"only the url differs", withURL, storedOf([]catalog.Output{r}), planner.Update, false},
	}
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := cat(r)
				if tc.d.Path == empty.Path {
					c = cat(empty)
				}
				p := build(t, input(wf, c, tc.stored, tc.d))
				if tc.action == planner.Unchanged {
					assertPlan(t, p, planner.Plan{Items: []planner.Item{unchanged(tc.d, r)}, Next: c})
					return
				}
				rec := written(tc.d, t0)
				assertPlan(t, p, planner.Plan{Items: []planner.Item{update(tc.d, rec, tc.write)}, Next: next(c, rec), Changed: true})
			})
		}
	})
}

func TestRecordUpdatedWhenOnlySourceIdentityChanges(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		c := cat(aIndex) // written from srcOld
		d := want("a/index.html", 10)
		p := build(t, input(wf, c, storedOf(c.Outputs), d))
		r := written(d, t0) // srcNew, created_at kept, updated_at now
		assertPlan(t, p, planner.Plan{Items: []planner.Item{update(d, r, false)}, Next: next(c, r), Changed: true})
	})
}

// Every field of a record is compared: a change to any of them updates the
// record in place (updated_at now, created_at kept); only sha256 and size
// changes rewrite bytes.
func TestRecordUpdatedInPlaceWhenAnyFieldChanges(t *testing.T) {
	base := catalog.Output{
		Path: "t/index.html", PipelineID: ownerA.PipelineID, DestinationID: ownerA.DestinationID, Source: srcNew,
		Kind: catalog.KindGenerated, SourcePath: "report.md", Transform: "markdown_to_html",
		SHA256: dig(10), Size: 10, CreatedAt: t0, UpdatedAt: t0, URL: "https://reports.example.com/t/",
	}
	baseD := planner.Desired{Path: "t/index.html", From: "report.md", Kind: catalog.KindGenerated, Transform: "markdown_to_html",
		SHA256: dig(10), Size: 10, URL: "https://reports.example.com/t/"}
	cases := []struct {
		name    string
		change  func(in *planner.Input, d *planner.Desired)
		wantRec func(o *catalog.Output)
		write   bool
	}{
		{"owner pipeline", func(in *planner.Input, _ *planner.Desired) { in.Owner.PipelineID = "other.pipeline" },
			func(o *catalog.Output) { o.PipelineID = "other.pipeline" }, false},
		{"owner destination", func(in *planner.Input, _ *planner.Desired) { in.Owner = ownerA2 },
			func(o *catalog.Output) { o.DestinationID = ownerA2.DestinationID }, false},
		// A greater id: with equal created times and digests a smaller one
		// loses (TestAdditiveNewestWinsAcrossSources).
		{"source.id", func(in *planner.Input, _ *planner.Desired) { in.Source.ID = "weatherreporter.x" },
			func(o *catalog.Output) { o.Source.ID = "weatherreporter.x" }, false},
		// A greater digest: with equal created times a smaller one loses
		// (TestNewestWinsPerOwnerAndSource).
		{"source.digest", func(in *planner.Input, _ *planner.Desired) { in.Source.Digest = dig(1007) },
			func(o *catalog.Output) { o.Source.Digest = dig(1007) }, false},
		{"source.created", func(in *planner.Input, _ *planner.Desired) { in.Source.Created = in.Source.Created.Add(time.Second) },
			func(o *catalog.Output) { o.Source.Created = o.Source.Created.Add(time.Second) }, false},
		{"kind", func(_ *planner.Input, d *planner.Desired) {
			d.Kind, d.From, d.Transform = catalog.KindSource, "t/index.html", ""
		},
			func(o *catalog.Output) { o.Kind, o.SourcePath, o.Transform = catalog.KindSource, "", "" }, false},
		{"source_path", func(_ *planner.Input, d *planner.Desired) { d.From = "other.md" },
			func(o *catalog.Output) { o.SourcePath = "other.md" }, false},
		{"transform", func(_ *planner.Input, d *planner.Desired) { d.Transform = "other_transform" },
			func(o *catalog.Output) { o.Transform = "other_transform" }, false},
		{"url changed", func(_ *planner.Input, d *planner.Desired) { d.URL = "https://elsewhere.example/" },
			func(o *catalog.Output) { o.URL = "https://elsewhere.example/" }, false},
		{"url dropped", func(_ *planner.Input, d *planner.Desired) { d.URL = "" },
			func(o *catalog.Output) { o.URL = "" }, false},
		{"sha256", func(_ *planner.Input, d *planner.Desired) { d.SHA256 = dig(11) },
			func(o *catalog.Output) { o.SHA256 = dig(11) }, true},
		{"size", func(_ *planner.Input, d *planner.Desired) { d.Size = 11 },
			func(o *catalog.Output) { o.Size = 11 }, true},
	}
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := cat(base)
				d := baseD
				in := input(wf, c, storedOf(c.Outputs), d)
				tc.change(&in, &in.Desired[0])
				d = in.Desired[0]
				r := base
				tc.wantRec(&r)
				r.UpdatedAt = now
				assertPlan(t, build(t, in), planner.Plan{Items: []planner.Item{update(d, r, tc.write)}, Next: next(c, r), Changed: true})
			})
		}
		t.Run("nothing", func(t *testing.T) {
			c := cat(base)
			p := build(t, input(wf, c, storedOf(c.Outputs), baseD))
			assertPlan(t, p, planner.Plan{Items: []planner.Item{unchanged(baseD, base)}, Next: c})
		})
	})
}

func TestGeneratedOutputRecordsSourcePathAndTransform(t *testing.T) {
	gen := planner.Desired{Path: "tomorrow/index.html", From: "report.md", Kind: catalog.KindGenerated, Transform: "markdown_to_html",
		SHA256: dig(5), Size: 5, URL: "https://reports.example.com/weather/tomorrow/"}
	src := want("tomorrow/report.md", 6)
	src.From = "report.md" // a source output's record never names its bundle path
	p := build(t, input(planner.Additive, nil, nil, gen, src))
	genRec, srcRec := written(gen, now), written(src, now)
	if genRec.SourcePath != "report.md" || genRec.Transform != "markdown_to_html" || srcRec.SourcePath != "" || srcRec.Transform != "" {
		t.Fatal("fixture is wrong")
	}
	assertPlan(t, p, planner.Plan{Items: []planner.Item{create(gen, genRec), create(src, srcRec)}, Next: fresh(genRec, srcRec), Changed: true})
}

func TestFirstPublicationCreatesFreshCatalog(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		d1, d2 := want("index.html", 1), want("img/logo.png", 2)
		p := build(t, input(wf, nil, map[string]planner.Stored{}, d1, d2))
		assertPlan(t, p, planner.Plan{
			Items:   []planner.Item{create(d2, written(d2, now)), create(d1, written(d1, now))},
			Next:    fresh(written(d1, now), written(d2, now)),
			Changed: true,
		})
	})
}

func TestLegacyAdditiveOverwritesPlannedPathsOnly(t *testing.T) {
	idx, fresh1 := want("index.html", 12), want("new.html", 13)
	in := input(planner.Additive, nil, map[string]planner.Stored{"index.html": {Size: 100}, "old.html": {Size: 5}, "sub/x.txt": {Size: 5}}, idx, fresh1)
	in.Legacy = true
	p := build(t, in)
	// A v4 catalog of exactly the planned outputs; old.html and sub/x.txt stay, unrecorded.
	assertPlan(t, p, planner.Plan{
		Items:   []planner.Item{create(idx, written(idx, now)), create(fresh1, written(fresh1, now))},
		Next:    fresh(written(idx, now), written(fresh1, now)),
		Changed: true,
	})
	if p.Deletes() != nil {
		t.Fatalf("legacy additive deletes %q", p.Deletes())
	}
}

func TestLegacyReplacementClearsRoot(t *testing.T) {
	idx, fresh1 := want("index.html", 12), want("new.html", 13)
	in := input(planner.Replacement, nil, map[string]planner.Stored{
		"index.html": {Size: 100}, "old.html": {Size: 5}, "sub/x.txt": {Size: 5},
		".distributor.json": {Size: 300}, ".distributor/lock": {Size: 1}, // never cleared, should a caller list them
	}, idx, fresh1)
	in.Legacy = true
	p := build(t, in)
	assertPlan(t, p, planner.Plan{
		Items:   []planner.Item{create(idx, written(idx, now)), create(fresh1, written(fresh1, now))},
		Clear:   []string{"old.html", "sub/x.txt"},
		Next:    fresh(written(idx, now), written(fresh1, now)),
		Changed: true,
	})
	if got := p.Deletes(); !reflect.DeepEqual(got, []string{"old.html", "sub/x.txt"}) {
		t.Fatalf("Deletes = %q", got)
	}
}

// Unplanned files an additive first run leaves behind are unmanaged for
// every later catalog run: planning them collides, and replacement leaves
// them alone.
func TestLegacyLeftoversBecomeUnmanaged(t *testing.T) {
	idx := want("index.html", 12)
	first := input(planner.Additive, nil, map[string]planner.Stored{"index.html": {Size: 100}, "old.html": {Size: 5}}, idx)
	first.Legacy = true
	p1 := build(t, first)
	stored, c := apply(first, p1)
	if _, ok := stored["old.html"]; !ok {
		t.Fatal("legacy additive removed a leftover")
	}
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		t.Run("planned again collides", func(t *testing.T) {
			old := want("old.html", 14)
			p := build(t, input(wf, c, stored, idx, old))
			assertPlan(t, p, planner.Plan{
				Items:      []planner.Item{unchanged(idx, written(idx, now)), collision(old)},
				Collisions: []string{"old.html"},
			})
		})
		t.Run("not planned is left alone", func(t *testing.T) {
			p := build(t, input(wf, c, stored, idx))
			assertPlan(t, p, planner.Plan{Items: []planner.Item{unchanged(idx, written(idx, now))}, Next: c})
		})
	})
}

func TestEmptyReplacementRefused(t *testing.T) {
	t.Run("owner has records", func(t *testing.T) {
		p, err := planner.Build(input(planner.Replacement, cat(all...), storedOf(all)))
		if !errors.Is(err, planner.ErrEmptyReplacement) || p.Next != nil {
			t.Fatalf("err = %v, next = %v; want ErrEmptyReplacement and no next catalog", err, p.Next)
		}
	})
	t.Run("legacy root would be cleared", func(t *testing.T) {
		in := input(planner.Replacement, nil, storedOf(nil, "index.html", "old.html"))
		in.Legacy = true
		if _, err := planner.Build(in); !errors.Is(err, planner.ErrEmptyReplacement) {
			t.Fatalf("err = %v, want ErrEmptyReplacement", err)
		}
	})
	t.Run("owner has nothing: allowed, no-op", func(t *testing.T) {
		c := cat(bIndex, shared)
		assertPlan(t, build(t, input(planner.Replacement, c, storedOf(c.Outputs))), planner.Plan{Next: c})
	})
	t.Run("fresh empty root: allowed, writes an empty catalog", func(t *testing.T) {
		assertPlan(t, build(t, input(planner.Replacement, nil, nil)), planner.Plan{Next: fresh(), Changed: true})
	})
	t.Run("additive empty publication deletes nothing", func(t *testing.T) {
		c := cat(all...)
		assertPlan(t, build(t, input(planner.Additive, c, storedOf(all))), planner.Plan{Next: c})
	})
}

func TestMaxDeletesAborts(t *testing.T) {
	keep := rec("a/keep.html", ownerA, srcNew, 1)
	gone := []catalog.Output{rec("a/1", ownerA, srcOld, 2), rec("a/2", ownerA, srcOld, 3), rec("a/3", ownerA, srcOld, 4)}
	c := cat(append([]catalog.Output{keep, bIndex}, gone...)...)
	d := want("a/keep.html", 1)
	for _, tc := range []struct {
		max     int
		refused bool
	}{{2, true}, {3, false}, {0, false}} {
		in := input(planner.Replacement, c, storedOf(c.Outputs), d)
		in.MaxDeletes = tc.max
		p, err := planner.Build(in)
		if tc.refused {
			if !errors.Is(err, planner.ErrTooManyDeletes) || p.Next != nil || !strings.Contains(err.Error(), "3 deletes, max_deletes is 2; nothing was deleted") {
				t.Fatalf("max %d: err = %v, next = %v", tc.max, err, p.Next)
			}
			continue
		}
		if err != nil {
			t.Fatalf("max %d: %v", tc.max, err)
		}
		assertPlan(t, p, planner.Plan{
			Items: []planner.Item{del(gone[0]), del(gone[1]), del(gone[2]), unchanged(d, keep)},
			Next:  next(c, keep, bIndex), Changed: true,
		})
	}
	t.Run("additive deletes nothing, so any limit passes", func(t *testing.T) {
		in := input(planner.Additive, c, storedOf(c.Outputs), d)
		in.MaxDeletes = 1
		assertPlan(t, build(t, in), planner.Plan{Items: []planner.Item{unchanged(d, keep)}, Next: c})
	})
	t.Run("legacy clear counts", func(t *testing.T) {
		in := input(planner.Replacement, nil, storedOf(nil, "x", "y", "z"), want("index.html", 1))
		in.Legacy, in.MaxDeletes = true, 2
		if _, err := planner.Build(in); !errors.Is(err, planner.ErrTooManyDeletes) {
			t.Fatalf("err = %v, want ErrTooManyDeletes for 3 clears", err)
		}
		in.MaxDeletes = 3
		if p := build(t, in); !reflect.DeepEqual(p.Deletes(), []string{"x", "y", "z"}) {
			t.Fatalf("Deletes = %q", p.Deletes())
		}
	})
	t.Run("checked before collisions", func(t *testing.T) {
		in := input(planner.Replacement, c, storedOf(c.Outputs, "notes.txt"), d, want("notes.txt", 5))
		in.MaxDeletes = 1
		p, err := planner.Build(in)
		if !errors.Is(err, planner.ErrTooManyDeletes) || !reflect.DeepEqual(p.Collisions, []string{"notes.txt"}) || p.Next != nil {
			t.Fatalf("err = %v, collisions = %q", err, p.Collisions)
		}
	})
}

func TestTakeOwnershipAdoptsOnlyCollidingPaths(t *testing.T) {
	forEachWorkflow(t, func(t *testing.T, wf planner.Workflow) {
		c := cat(aIndex, bIndex)
		notes, idx, brandNew := want("notes.txt", 40), want("a/index.html", 10), want("a/brand-new.html", 41)
		in := input(wf, c, storedOf(c.Outputs, "notes.txt", "other.txt"), notes, idx, brandNew)
		in.TakeOwnership = true
		p := build(t, in)
		adopted := create(notes, written(notes, now))
		adopted.Adopted = true
		assertPlan(t, p, planner.Plan{
			Items: []planner.Item{
				create(brandNew, written(brandNew, now)), // not adopted: nothing was there
				update(idx, written(idx, t0), false),
				adopted,
			},
			// other.txt stays unmanaged, even under replacement.
			Next:    next(c, written(brandNew, now), written(idx, t0), bIndex, written(notes, now)),
			Changed: true,
		})
	})
}

// The workflow and the owners are policy, not state: the same publication
// under either workflow writes the same bytes, and the top level holds only
// the seed's fields.
func TestCatalogHasNoWorkflowOrOwners(t *testing.T) {
	c := cat(aIndex, bIndex)
	var docs [][]byte
	for _, wf := range bothWorkflows {
		p := build(t, input(wf, c, storedOf(c.Outputs), want("a/index.html", 12), want("a/more.html", 13)))
		b, err := catalog.Marshal(p.Next)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	if string(docs[0]) != string(docs[1]) {
		t.Fatalf("catalog depends on the workflow:\n%s\n%s", docs[0], docs[1])
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(docs[0], &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workflow", "owners", "sources", "pipeline_id", "destination_id", "published_at"} {
		if _, ok := top[k]; ok {
			t.Errorf("top-level %q in the catalog", k)
		}
	}
	if len(top) != 6 {
		t.Errorf("top-level keys: %d, want the seed's 6", len(top))
	}
}

func TestDuplicateDesiredPath(t *testing.T) {
	a, b := want("index.html", 1), want("index.html", 2)
	a.From, b.From = "report.md", "summary.md"
	_, err := planner.Build(input(planner.Additive, nil, nil, a, b))
	if !errors.Is(err, planner.ErrDuplicateOutput) || !strings.Contains(err.Error(), `"index.html" from "report.md" and "summary.md"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestReservedOutputPathRejected(t *testing.T) {
	for _, path := range []string{".distributor.json", ".distributor/lock", ".distributor", ".Distributor.json", ".distributor.json/x"} {
		p, err := planner.Build(input(planner.Additive, nil, nil, want(path, 1)))
		if !errors.Is(err, catalog.ErrBadPath) || !strings.Contains(err.Error(), "reserved") || p.Next != nil {
			t.Errorf("%q: err = %v", path, err)
		}
	}
}

func TestInvalidDesiredPathRejected(t *testing.T) {
	for _, path := range []string{"", "../x", "/abs", `a\b`, "a//b", "a\x00"} {
		if _, err := planner.Build(input(planner.Additive, nil, nil, want(path, 1))); !errors.Is(err, catalog.ErrBadPath) {
			t.Errorf("%q: err = %v, want ErrBadPath", path, err)
		}
	}
}

// Whatever the next catalog could not hold is refused before any write.
func TestInvalidDesiredOutputRejected(t *testing.T) {
	cases := map[string]func(in *planner.Input){
		"bad sha256":    func(in *planner.Input) { in.Desired[0].SHA256 = "abc" },
		"negative size": func(in *planner.Input) { in.Desired[0].Size = -1 },
		"no kind":       func(in *planner.Input) { in.Desired[0].Kind = "" },
		"generated without source": func(in *planner.Input) {
			in.Desired[0].Kind, in.Desired[0].From, in.Desired[0].Transform = catalog.KindGenerated, "", "t"
		},
		"generated without transform": func(in *planner.Input) { in.Desired[0].Kind, in.Desired[0].Transform = catalog.KindGenerated, "" },
		"generated from a bad path": func(in *planner.Input) {
			in.Desired[0].Kind, in.Desired[0].From, in.Desired[0].Transform = catalog.KindGenerated, "../x", "t"
		},
		"bad source digest":            func(in *planner.Input) { in.Source.Digest = "sha256:" },
		"no source id":                 func(in *planner.Input) { in.Source.ID = "" },
		"no source created":            func(in *planner.Input) { in.Source.Created = time.Time{} },
		"no now":                       func(in *planner.Input) { in.Now = time.Time{} },
		"no pipeline":                  func(in *planner.Input) { in.Owner.PipelineID = "" },
		"no destination":               func(in *planner.Input) { in.Owner.DestinationID = "" },
		"catalog and legacy":           func(in *planner.Input) { in.Catalog, in.Legacy = cat(), true },
		"unknown workflow":             func(in *planner.Input) { in.Workflow = "mirror" },
		"empty workflow (parse first)": func(in *planner.Input) { in.Workflow = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := input(planner.Additive, nil, nil, want("index.html", 1))
			mutate(&in)
			p, err := planner.Build(in)
			if err == nil || p.Next != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, next = %v; want one refusing line", err, p.Next)
			}
		})
	}
}

func TestDefaultWorkflowIsAdditive(t *testing.T) {
	if wf, err := planner.ParseWorkflow(""); err != nil || wf != planner.Additive {
		t.Fatalf(`ParseWorkflow("") = %q, %v; want additive`, wf, err)
	}
}

func TestParseWorkflow(t *testing.T) {
	for _, s := range []string{"additive", "replacement"} {
		if wf, err := planner.ParseWorkflow(s); err != nil || string(wf) != s {
			t.Errorf("ParseWorkflow(%q) = %q, %v", s, wf, err)
		}
	}
	for _, s := range []string{"mirror", "Additive", " replacement", "single_owner"} {
		wf, err := planner.ParseWorkflow(s)
		if err == nil || wf != "" || !strings.Contains(err.Error(), `unknown workflow "`+s+`": use "replacement" or "additive"`) {
			t.Errorf("ParseWorkflow(%q) = %q, %v", s, wf, err)
		}
	}
}

func TestDistributorVersionWrittenOnlyWhenChanged(t *testing.T) {
	c := cat(aIndex)
	in := input(planner.Additive, c, storedOf(c.Outputs), want("a/index.html", 12))
	in.DistributorVersion = ""
	if p := build(t, in); p.Next.DistributorVersion != "v1" {
		t.Fatalf("version = %q, want the catalog's v1 kept when none is given", p.Next.DistributorVersion)
	}
	in.DistributorVersion = "v2"
	if p := build(t, in); p.Next.DistributorVersion != "v2" {
		t.Fatalf("version = %q, want v2", p.Next.DistributorVersion)
	}
}
