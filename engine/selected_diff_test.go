package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// diffPaths are paths that are folders of each other, and paths that
// sort between a folder and what is below it.
var diffPaths = []string{"a", "a/b", "a/b/c", "a-b", "a.b", "a/b-c", "b", "c/d", "c", "c/d/e", "c0", "g/h/i", "j"}

// TestEnginePlanIsThePlannersOfTheWholeRoot: for random roots (a catalog
// of several owners, objects managed and not, files where folders are
// planned and below planned files) and publications, the plan the engine
// makes from what it reads of the root (the records and objects its plan
// selects) is planner.Build's of the whole catalog and the whole listing.
func TestEnginePlanIsThePlannersOfTheWholeRoot(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	owner := catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"}
	owners := []catalog.Owner{owner, {PipelineID: "other", DestinationID: "latest-html"}, {PipelineID: "weatherreporter.daily", DestinationID: "archive"}}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(t.TempDir(), "root")
		if err != nil {
			rt.Fatal(err)
		}
		root, err := local.New(dir)
		if err != nil {
			rt.Fatal(err)
		}
		ctx := context.Background()

		// Objects: a tree (no object where another needs a folder).
		var objects []string
		for _, p := range diffPaths {
			if rapid.Bool().Draw(rt, "object "+p) && !treeClash(objects, p) {
				objects = append(objects, p)
			}
		}
		for _, p := range objects {
			testenv.WriteFiles(t, dir, map[string]string{p: "stored " + p})
		}
		cat := &catalog.Catalog{DistributorVersion: "old", CreatedAt: now.Add(-48 * time.Hour), UpdatedAt: now.Add(-24 * time.Hour)}
		for i, p := range diffPaths {
			if !rapid.Bool().Draw(rt, "record "+p) {
				continue
			}
			o := rapid.SampledFrom(owners).Draw(rt, "owner "+p)
			src := catalog.Source{ID: "weatherreporter.tomorrow", Digest: fmt.Sprintf("sha256:%064x", rapid.IntRange(1, 3).Draw(rt, "digest "+p)),
				Created: now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(rt, "age "+p)) * time.Minute)}
			cat.Outputs = append(cat.Outputs, catalog.Output{Path: p, PipelineID: o.PipelineID, DestinationID: o.DestinationID, Source: src,
				Kind: catalog.KindSource, SHA256: fmt.Sprintf("sha256:%064x", 100+i), Size: int64(len("stored " + p)),
				CreatedAt: src.Created, UpdatedAt: src.Created})
		}
		if rapid.Bool().Draw(rt, "catalog") {
			data, err := catalog.Marshal(cat)
			if err != nil {
				rt.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, catalog.FileName), data, 0o644); err != nil {
				rt.Fatal(err)
			}
		} else {
			cat = nil
		}

		// The publication: files at paths of the universe that a bundle can hold.
		files := map[string]string{}
		for _, p := range diffPaths {
			if rapid.Bool().Draw(rt, "desired "+p) && !treeClash(keys(files), p) {
				files[p] = "new " + p
			}
		}
		wf := rapid.SampledFrom([]planner.Workflow{planner.Additive, planner.Replacement}).Draw(rt, "workflow")
		pub := diffPublication(t, owner, wf, files, now)
		pub.TakeOwnership = rapid.Bool().Draw(rt, "take ownership")
		pub.MaxDeletes = rapid.IntRange(0, 3).Draw(rt, "max deletes")

		// Small catalogs are planned whole, large ones from what the plan
		// selects: both ways, whatever the size.
		whole := rapid.SampledFrom([]int64{-1, 0}).Draw(rt, "whole catalog")
		e := &engine.Engine{Now: func() time.Time { return now }, Version: "test", Workers: 1, WholeCatalog: whole}
		got, gerr := e.Plan(ctx, root, pub)

		stored := map[string]planner.Stored{}
		if err := root.List(ctx, "", func(o storage.ObjectInfo) error {
			if !catalog.IsReserved(o.Path) {
				stored[o.Path] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
		desired := make([]planner.Desired, len(pub.Outputs))
		for i, o := range pub.Outputs {
			desired[i] = o.Desired
		}
		want, werr := planner.Build(planner.Input{Owner: pub.Owner, Source: pub.Source, Workflow: wf, Desired: desired, Catalog: cat,
			Stored: stored, Now: now, MaxDeletes: pub.MaxDeletes, TakeOwnership: pub.TakeOwnership, DistributorVersion: "test"})
		if errString(gerr) != errString(werr) && !strings.Contains(errString(gerr), errString(werr)) {
			rt.Fatalf("engine's error %v, planner's %v", gerr, werr)
		}
		if werr != nil {
			return
		}
		if !reflect.DeepEqual(got.Items, want.Items) || !reflect.DeepEqual(got.Collisions, want.Collisions) ||
			got.Changed != want.Changed || !reflect.DeepEqual(got.Superseded, want.Superseded) {
			rt.Fatalf("engine's plan %s (collisions %v)\nplanner's of the whole %s (collisions %v)", planItems(got), got.Collisions, planItems(want), want.Collisions)
		}
	})
}

// planItems shows a plan's items: path, action, write, record's owner.
func planItems(p planner.Plan) string {
	var b strings.Builder
	for _, it := range p.Items {
		fmt.Fprintf(&b, "%s:%s:%v:%s ", it.Path, it.Action, it.Write, it.Record.Owner())
	}
	return b.String()
}

// treeClash reports whether p and one of paths cannot both be files.
func treeClash(paths []string, p string) bool {
	for _, q := range paths {
		if strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") || p == q {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// diffPublication is the publication of files by owner.
func diffPublication(t *testing.T, owner catalog.Owner, wf planner.Workflow, files map[string]string, now time.Time) engine.Publication {
	t.Helper()
	ctx := context.Background()
	bdir := t.TempDir()
	testenv.WriteBundle(t, bdir, "weatherreporter.tomorrow", now.Add(-time.Minute), files)
	bstore, err := local.New(bdir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(ctx, bstore, bdir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dest := config.Destination{ID: owner.DestinationID, Backend: "local", Workflow: wf, Publish: config.Publish{Sources: true, Include: []string{"**"}}}
	outs, err := service.Desire(ctx, dest, owner.PipelineID, b)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Publication{Owner: owner, Workflow: wf, Source: catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created},
		Outputs: outs, Bundle: b}
}
