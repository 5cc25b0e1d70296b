package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// maintenanceRoot is a random root for prune and reconcile-state: a
// catalog of several owners' records, each one's bytes stored as
// recorded, stored with another size, or gone, and a symbolic link (to a
// folder outside the root) on the way to some records.
type maintenanceRoot struct {
	cat     *catalog.Catalog
	files   map[string]string
	link    bool
	indent  bool // the catalog is written in another form than Marshal's
	outside string
}

// write makes the root in dir.
func (m maintenanceRoot) write(t *testing.T, dir string) {
	testenv.WriteFiles(t, dir, m.files)
	if m.link {
		if err := os.Symlink(m.outside, filepath.Join(dir, "ln")); err != nil {
			t.Fatal(err)
		}
	}
	if m.cat == nil {
		return
	}
	data, err := catalog.Marshal(m.cat)
	if err != nil {
		t.Fatal(err)
	}
	if m.indent {
		var b bytes.Buffer
		if err := json.Indent(&b, data, "", "\t"); err != nil {
			t.Fatal(err)
		}
		data = b.Bytes()
	}
	if err := os.WriteFile(filepath.Join(dir, catalog.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// maintenancePaths are the paths records and files may be at: folders
// of each other, paths sorting between a folder and what is below it,
// and paths below the link ln.
var maintenancePaths = []string{"a", "a/b", "a/b/c", "a-b", "a.b", "b", "c/d", "c/d/e", "c0", "ln/x", "ln/y/z", "m/n"}

// drawMaintenanceRoot draws a root of records by owners, updated at
// most two hours before now.
func drawMaintenanceRoot(t *testing.T, rt *rapid.T, owners []catalog.Owner, now time.Time) maintenanceRoot {
	m := maintenanceRoot{files: map[string]string{}, link: rapid.Bool().Draw(rt, "link"), indent: rapid.Bool().Draw(rt, "indent"), outside: t.TempDir()}
	testenv.WriteFiles(t, m.outside, map[string]string{"x": "outside x", "y/z": "outside z"})
	if !rapid.Bool().Draw(rt, "catalog") {
		return m
	}
	m.cat = &catalog.Catalog{DistributorVersion: "old", CreatedAt: now.Add(-72 * time.Hour), UpdatedAt: now.Add(-3 * time.Hour)}
	var stored []string
	for i, p := range maintenancePaths {
		if !rapid.Bool().Draw(rt, "record "+p) {
			continue
		}
		o := rapid.SampledFrom(owners).Draw(rt, "owner "+p)
		body := "stored " + p
		at := now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(rt, "age "+p)) * time.Minute)
		src := catalog.Source{ID: "src." + o.PipelineID, Digest: fmt.Sprintf("sha256:%064x", i+1), Created: at}
		m.cat.Outputs = append(m.cat.Outputs, catalog.Output{Path: p, PipelineID: o.PipelineID, DestinationID: o.DestinationID, Source: src,
			Kind: catalog.KindSource, SHA256: digestOfString(body), Size: int64(len(body)), CreatedAt: at.Add(-time.Hour), UpdatedAt: at})
		switch rapid.IntRange(0, 2).Draw(rt, "stored "+p) {
		case 1:
			body += " and more"
		case 2:
			continue // gone
		}
		if !strings.HasPrefix(p, "ln/") && !treeClash(stored, p) {
			stored = append(stored, p)
			m.files[p] = body
		}
	}

	// Padding: records of an owner no command here selects, no bytes
	// stored, enough for a backend to look the selected paths up one by
	// one rather than list the root.
	if rapid.IntRange(0, 3).Draw(rt, "padding") == 0 {
		src := catalog.Source{ID: "src.pad", Digest: fmt.Sprintf("sha256:%064x", 99), Created: now.Add(-time.Hour)}
		for i := range 8000 {
			m.cat.Outputs = append(m.cat.Outputs, catalog.Output{Path: fmt.Sprintf("pad/%05d", i), PipelineID: "pad", DestinationID: "elsewhere", Source: src,
				Kind: catalog.KindSource, SHA256: src.Digest, Size: 1, CreatedAt: src.Created, UpdatedAt: src.Created})
		}
	}
	m.cat.Sort()
	return m
}

// reconcileReference is reconcile-state's plan for sel of the whole
// catalog of m against a listing of the whole root (written in dir): a
// record at a symbolic link or below one is missing.
func reconcileReference(t *testing.T, m maintenanceRoot, dir string, sel planner.Selector, now time.Time, maxDeletes int) (planner.MaintenancePlan, error) {
	m.write(t, dir)
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]planner.Stored{}
	if err := root.List(context.Background(), "", func(o storage.ObjectInfo) error {
		if !catalog.IsReserved(o.Path) && !o.Symlink {
			stored[o.Path] = planner.Stored{Size: o.Size}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return planner.Reconcile(m.cat, sel, stored, now, maxDeletes)
}

// maintenanceOutcome is what a maintenance command did to a root.
type maintenanceOutcome struct {
	err     string
	res     engine.MaintenanceResult
	catalog string
	listing map[string]int64
}

// TestStreamedMaintenanceIsTheWholeCatalogs: on random roots, prune and
// reconcile-state of what they select of a streamed catalog (a large
// root's way) plan as they do with the whole catalog, and commit the same
// catalog, byte for byte, and leave the same files.
func TestStreamedMaintenanceIsTheWholeCatalogs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	owners := []catalog.Owner{{PipelineID: "p", DestinationID: "site"}, {PipelineID: "q", DestinationID: "site"}, {PipelineID: "p", DestinationID: "archive"}}
	rapid.Check(t, func(rt *rapid.T) {
		m := drawMaintenanceRoot(t, rt, owners, now)
		owner := rapid.SampledFrom(owners).Draw(rt, "owner")
		maxDeletes := rapid.IntRange(0, 3).Draw(rt, "max deletes")
		dryRun := rapid.Bool().Draw(rt, "dry run")
		var op func(e *engine.Engine, root storage.Backend) (engine.MaintenanceResult, error)
		check := func(maintenanceOutcome) {} // against a reference, where there is one
		if rapid.Bool().Draw(rt, "prune") {
			cutoff := now.Add(-time.Duration(rapid.IntRange(0, 130).Draw(rt, "cutoff")) * time.Minute)
			op = func(e *engine.Engine, root storage.Backend) (engine.MaintenanceResult, error) {
				return e.Prune(context.Background(), root, heldLease{}, owner, engine.PruneOptions{Cutoff: cutoff, MaxDeletes: maxDeletes, DryRun: dryRun})
			}
		} else {
			sel := planner.Selector{Owner: &owner}
			switch rapid.IntRange(0, 2).Draw(rt, "selector") {
			case 1:
				sel = planner.Selector{AllOwners: true}
			case 2:
				sel = planner.Selector{AllOwners: true, DestinationID: "site"}
			}
			refresh := rapid.Bool().Draw(rt, "refresh")
			dir, err := os.MkdirTemp(t.TempDir(), "reference")
			if err != nil {
				rt.Fatal(err)
			}
			want, werr := reconcileReference(t, m, dir, sel, now, maxDeletes)
			check = func(got maintenanceOutcome) {
				if (werr == nil) != (got.err == "") {
					rt.Fatalf("reconcile-state's error %q; the planner's of the whole root %v", got.err, werr)
				}
				if werr == nil && (!reflect.DeepEqual(paths(got.res.Plan.Removed), paths(want.Removed)) || !reflect.DeepEqual(got.res.Plan.SizeMismatches, want.SizeMismatches)) {
					rt.Fatalf("reconcile-state removed %v, size mismatches %v; the planner's of the whole root %v, %v",
						paths(got.res.Plan.Removed), got.res.Plan.SizeMismatches, paths(want.Removed), want.SizeMismatches)
				}
			}
			op = func(e *engine.Engine, root storage.Backend) (engine.MaintenanceResult, error) {
				return e.Reconcile(context.Background(), root, heldLease{}, sel, engine.ReconcileOptions{Refresh: refresh, MaxDeletes: maxDeletes, DryRun: dryRun})
			}
		}
		run := func(whole int64) maintenanceOutcome {
			dir, err := os.MkdirTemp(t.TempDir(), "root")
			if err != nil {
				rt.Fatal(err)
			}
			m.write(t, dir)
			root, err := local.New(dir)
			if err != nil {
				rt.Fatal(err)
			}
			e := &engine.Engine{Now: func() time.Time { return now }, Version: "test", WholeCatalog: whole}
			reads := &wholeReads{Backend: root}
			res, err := op(e, reads)
			if whole < 0 && !m.indent && reads.n > 0 {
				rt.Fatalf("the streamed run read the catalog whole %d times", reads.n)
			}
			out := maintenanceOutcome{err: strings.ReplaceAll(errString(err), dir, "ROOT"), listing: map[string]int64{}}
			res.Root, res.Plan.Next = "", nil // Next: the records read
			out.res = res
			data, _ := os.ReadFile(filepath.Join(dir, catalog.FileName))
			out.catalog = string(data)
			if err := root.List(context.Background(), "", func(o storage.ObjectInfo) error {
				out.listing[o.Path] = o.Size
				return nil
			}); err != nil {
				rt.Fatal(err)
			}
			return out
		}
		whole, streamed := run(0), run(-1)
		check(whole)
		if !reflect.DeepEqual(streamed, whole) {
			rt.Fatalf("streamed:\n%+v\n%s\nwhole:\n%+v\n%s", streamed.res, streamed.catalog, whole.res, whole.catalog)
		}
	})
}

// wholeReads counts the reads of the catalog whole (ReadVersion): a
// streamed read of one in Marshal's form makes none.
type wholeReads struct {
	storage.Backend
	n int
}

func (w *wholeReads) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == catalog.FileName {
		w.n++
	}
	return w.Backend.ReadVersion(ctx, p, opts...)
}

func paths(outs []catalog.Output) []string {
	var ps []string
	for _, o := range outs {
		ps = append(ps, o.Path)
	}
	return ps
}
