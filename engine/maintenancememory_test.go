package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage/local"
)

// heldAtCommits is what reconcile-state, the roll forward of a killed
// prune's intent and a prune of a small owner held at their commits on a
// root of n records of another owner, and the catalog's size.
type heldAtCommits struct {
	reconcile, recovery, prune int64
	size                       int64
}

// maintenanceHeld runs, on a root of n records of p.big and ten of
// small: reconcile-state of small after one of its files went, a prune
// of small killed after five of its deletes and the recovery of its
// intent, and a prune of the rest; each changes only small's records.
func maintenanceHeld(t *testing.T, n int) heldAtCommits {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	small := catalog.Owner{PipelineID: "p.small", DestinationID: "site"}
	bigCatalogWithSmallOwner(t, root, n, small)
	fi, err := os.Stat(filepath.Join(dir, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	held := heldAtCommits{size: fi.Size()}
	written := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	e := &engine.Engine{Version: "test", Now: func() time.Time { return written.Add(2 * time.Hour) }}
	prune := engine.PruneOptions{Cutoff: written.Add(time.Hour)}

	if err := os.Remove(filepath.Join(dir, "small/f0.txt")); err != nil {
		t.Fatal(err)
	}
	held.reconcile = heldAtCommit(t, root, func(probe *heapAtCommit) error {
		res, err := e.Reconcile(ctx, probe, heldLease{}, planner.Selector{Owner: &small}, engine.ReconcileOptions{})
		if err == nil && len(res.Plan.Removed) != 1 {
			t.Fatalf("reconcile-state removed %v, want small/f0.txt", res.Plan.Removed)
		}
		return err
	})

	// The intent (call 1), five deletes, then the kill.
	if _, err := e.Prune(ctx, &dyingBackend{Backend: root, killAt: 7}, heldLease{}, small, prune); err == nil {
		t.Fatal("the killed prune succeeded")
	}
	held.recovery = heldAtCommit(t, root, func(probe *heapAtCommit) error {
		found, err := e.Recover(ctx, probe, heldLease{})
		if err == nil && !found {
			t.Fatal("no intent to recover")
		}
		return err
	})
	held.prune = heldAtCommit(t, root, func(probe *heapAtCommit) error {
		res, err := e.Prune(ctx, probe, heldLease{}, small, prune)
		if err == nil && len(res.Plan.Removed) != 4 {
			t.Fatalf("prune removed %d records, want the four left", len(res.Plan.Removed))
		}
		return err
	})

	data, err := os.ReadFile(filepath.Join(dir, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Outputs) != n || next.Outputs[n-1].PipelineID != "p.big" {
		t.Fatalf("the catalog left holds %d records, want the %d of p.big", len(next.Outputs), n)
	}
	return held
}

// heldAtCommit is how much more live heap than before op there was when
// op committed a catalog through the probe it is given.
func heldAtCommit(t *testing.T, root *local.Backend, op func(*heapAtCommit) error) int64 {
	t.Helper()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	probe := &heapAtCommit{Backend: root}
	if err := op(probe); err != nil {
		t.Fatal(err)
	}
	if probe.live == 0 {
		t.Fatal("no catalog committed")
	}
	return int64(probe.live) - int64(before.HeapAlloc)
}

// TestMaintenanceHoldsNotTheCatalogOfALargeRoot: prune, the roll forward
// of an intent and reconcile-state hold at their commits the records they
// change and where the runs of the others lie (a sparse catalog.Layout:
// the next catalog is merged from the old bytes by it), not a record's
// path or place each: what they hold barely grows with the catalog. Each
// commits the old catalog less what it removed. Not parallel: it
// measures the heap.
func TestMaintenanceHoldsNotTheCatalogOfALargeRoot(t *testing.T) {
	few, many := maintenanceHeld(t, 40_000), maintenanceHeld(t, 160_000)
	t.Logf("held at the commit, at 40,000 records (%d MB) and at 160,000 (%d MB): reconcile-state %d KB, %d KB; recovery %d KB, %d KB; prune %d KB, %d KB",
		few.size>>20, many.size>>20, few.reconcile>>10, many.reconcile>>10, few.recovery>>10, many.recovery>>10, few.prune>>10, many.prune>>10)
	const bound = 1 << 20 // a path and an offset a record are 5 MB more; the runs, a few hundred, far less
	for _, c := range []struct {
		name      string
		few, many int64
	}{{"prune", few.prune, many.prune}, {"recovery", few.recovery, many.recovery}, {"reconcile-state", few.reconcile, many.reconcile}} {
		if grown := c.many - c.few; grown > bound {
			t.Errorf("%s held %d KB more at 160,000 records than at 40,000, want less than %d KB; the catalog grew by %d MB", c.name, grown>>10, bound>>10, (many.size-few.size)>>20)
		}
	}
}
