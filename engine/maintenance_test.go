package engine_test

// prune, reconcile-state and verify end to end on both backends, under the
// root's lock object as the CLI's direct mode runs them.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// withLease runs fn on dest's root under the harness's locker at time now.
func (h *harness) withLease(now time.Time, dest string, fn func(root storage.Backend, l lease.Lease) error) error {
	h.T.Helper()
	d, ok := h.Config.Destination(dest)
	if !ok {
		h.T.Fatalf("no destination %q", dest)
	}
	h.Clock.Set(now)
	return h.Service.WithLease(context.Background(), d, fn)
}

func (h *harness) prune(now time.Time, dest string, owner catalog.Owner, cutoff time.Time, maxDeletes int, dryRun bool) (engine.MaintenanceResult, error) {
	h.T.Helper()
	var res engine.MaintenanceResult
	err := h.withLease(now, dest, func(root storage.Backend, l lease.Lease) error {
		var err error
		res, err = h.Service.Engine.Prune(context.Background(), root, l, owner, engine.PruneOptions{Cutoff: cutoff, MaxDeletes: maxDeletes, DryRun: dryRun})
		return err
	})
	return res, err
}

func (h *harness) reconcile(now time.Time, dest string, sel planner.Selector, refresh bool) (engine.MaintenanceResult, error) {
	h.T.Helper()
	var res engine.MaintenanceResult
	err := h.withLease(now, dest, func(root storage.Backend, l lease.Lease) error {
		var err error
		res, err = h.Service.Engine.Reconcile(context.Background(), root, l, sel, engine.ReconcileOptions{Refresh: refresh})
		return err
	})
	return res, err
}

// verify runs as the CLI does: without a lease.
func (h *harness) verify(dest string, match func(catalog.Output) bool) (engine.VerifyReport, error) {
	h.T.Helper()
	d, ok := h.Config.Destination(dest)
	if !ok {
		h.T.Fatalf("no destination %q", dest)
	}
	root, err := h.Stores.Destination(context.Background(), d)
	if err != nil {
		h.T.Fatal(err)
	}
	return h.Service.Engine.Verify(context.Background(), root, match)
}

func all(catalog.Output) bool { return true }

func removedPaths(p planner.MaintenancePlan) []string {
	out := []string{}
	for _, o := range p.Removed {
		out = append(out, o.Path)
	}
	return out
}

// listing is every object in the root, reserved ones included, with sizes.
func listing(t *testing.T, root storage.Backend) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if err := root.List(context.Background(), "", func(o storage.ObjectInfo) error {
		out[o.Path] = o.Size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	ownerA = catalog.Owner{PipelineID: pipeA, DestinationID: "latest"}
)

// twoOwners sets up a root shared by ownerA (additive, "latest") and
// ownerB (additive, "tides").
func twoOwners(t *testing.T, newRoot newRootFunc) (*harness, storage.Backend, config.Destination) {
	h := newHarness(t)
	root, base := newRoot(t)
	h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
	h.AddDest(named(base, "tides", planner.Additive), root, pipeB)
	return h, root, base
}

func TestPruneAgeBoundary(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		cutoff := t1.Add(time.Hour)
		h.MustPublish(cutoff.Add(-time.Second), pipeA, "latest", "weatherreporter.a", map[string]string{"older.txt": "o"})
		h.MustPublish(cutoff, pipeA, "latest", "weatherreporter.b", map[string]string{"edge.txt": "e"})
		h.MustPublish(cutoff.Add(time.Second), pipeA, "latest", "weatherreporter.c", map[string]string{"newer.txt": "n"})

		res, err := h.prune(cutoff.Add(48*time.Hour), "latest", ownerA, cutoff, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "removed", removedPaths(res.Plan), []string{"older.txt"})
		wantContents(t, root, map[string]string{"edge.txt": "e", "newer.txt": "n"})
		cat := assertDescribesStorage(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"edge.txt", "newer.txt"})
		if !cat.UpdatedAt.Equal(cutoff.Add(48 * time.Hour)) {
			t.Fatalf("catalog updated_at %s, want the prune's time", cat.UpdatedAt)
		}
	})
}

func TestPruneIsOwnerScoped(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, base := twoOwners(t, newRoot)
		// Same pipeline, other destination: another owner too.
		h.AddDest(named(base, "latest-2", planner.Additive), root, pipeA)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a/1.txt": "1", "a/2.txt": "2"})
		h.MustPublish(t1, pipeB, "tides", "tides.now", map[string]string{"b/1.txt": "b"})
		h.MustPublish(t1, pipeA, "latest-2", "weatherreporter.today", map[string]string{"c/1.txt": "c"})
		before, _ := readCatalog(t, root)

		res, err := h.prune(t2.Add(time.Hour), "latest", ownerA, t2, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "removed", removedPaths(res.Plan), []string{"a/1.txt", "a/2.txt"})
		wantContents(t, root, map[string]string{"b/1.txt": "b", "c/1.txt": "c"})
		after := assertDescribesStorage(t, root)
		for _, p := range []string{"b/1.txt", "c/1.txt"} {
			if got, want := mustRecord(t, after, p), mustRecord(t, before, p); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s record changed:\n%+v\nwant %+v", p, got, want)
			}
		}
	})
}

func TestPruneDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b"})
		before, list, v := contents(t, root), listing(t, root), catalogVersion(t, root)

		res, err := h.prune(t2, "latest", ownerA, t2, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if !res.DryRun {
			t.Fatal("result not marked as a dry run")
		}
		wantStrings(t, "would remove", removedPaths(res.Plan), []string{"a.txt", "b.txt"})
		wantContents(t, root, before)
		if got := listing(t, root); !reflect.DeepEqual(got, list) {
			t.Fatalf("objects %v -> %v", list, got)
		}
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}
	})
}

func TestPruneHonoursMaxDeletes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
		before, list, v := contents(t, root), listing(t, root), catalogVersion(t, root)

		_, err := h.prune(t2, "latest", ownerA, t2, 2, false)
		if !errors.Is(err, planner.ErrTooManyDeletes) {
			t.Fatalf("err = %v, want ErrTooManyDeletes", err)
		}
		wantContents(t, root, before)
		if got := listing(t, root); !reflect.DeepEqual(got, list) {
			t.Fatalf("objects %v -> %v", list, got)
		}
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("catalog version %s -> %s", v, got)
		}
	})
}

func TestReconcileRemovesRecordsOfMissingFiles(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
		h.MustPublish(t1, pipeB, "tides", "tides.now", map[string]string{"d.txt": "d", "e.txt": "e"})
		before, _ := readCatalog(t, root)
		// Behind distributor's back: two outputs go, an unmanaged file comes.
		if err := root.Delete(context.Background(), "a.txt", "d.txt"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, root, "u.txt", "unmanaged")

		res, err := h.reconcile(t2, "latest", planner.Selector{Owner: &ownerA}, false)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "removed", removedPaths(res.Plan), []string{"a.txt"})
		wantStrings(t, "size mismatches", res.Plan.SizeMismatches, nil)
		cat, _ := readCatalog(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"b.txt", "c.txt", "d.txt", "e.txt"})
		for _, p := range []string{"b.txt", "c.txt", "d.txt", "e.txt"} {
			if got, want := mustRecord(t, cat, p), mustRecord(t, before, p); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s record changed:\n%+v\nwant %+v", p, got, want)
			}
		}

		res, err = h.reconcile(t2, "tides", planner.Selector{AllOwners: true}, false)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "removed (all owners)", removedPaths(res.Plan), []string{"d.txt"})
		cat, _ = readCatalog(t, root)
		wantStrings(t, "records", recordPaths(cat), []string{"b.txt", "c.txt", "e.txt"})
		wantContents(t, root, map[string]string{"b.txt": "b", "c.txt": "c", "e.txt": "e", "u.txt": "unmanaged"})
	})
}

func TestReconcileReportsSizeMismatchAndRefreshes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "bravo"})
		mustPut(t, root, "b.txt", "bravo, grown")
		v := catalogVersion(t, root)

		res, err := h.reconcile(t2, "latest", planner.Selector{Owner: &ownerA}, false)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "size mismatches", res.Plan.SizeMismatches, []string{"b.txt"})
		wantStrings(t, "removed", removedPaths(res.Plan), nil)
		if len(res.Refreshed) != 0 {
			t.Fatalf("refreshed %v without refresh", res.Refreshed)
		}
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("reporting changed the catalog: %s -> %s", v, got)
		}

		t3 := t2.Add(time.Minute)
		res, err = h.reconcile(t3, "latest", planner.Selector{Owner: &ownerA}, true)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "size mismatches", res.Plan.SizeMismatches, []string{"b.txt"})
		if len(res.Refreshed) != 1 || res.Refreshed[0].Path != "b.txt" {
			t.Fatalf("refreshed %+v, want b.txt", res.Refreshed)
		}
		cat := assertDescribesStorage(t, root)
		b := mustRecord(t, cat, "b.txt")
		if b.SHA256 != digestOf([]byte("bravo, grown")) || b.Size != int64(len("bravo, grown")) || !b.UpdatedAt.Equal(t3) || !b.CreatedAt.Equal(t1) {
			t.Fatalf("refreshed record %+v", b)
		}
		if rep, err := h.verify("latest", all); err != nil || !rep.OK() {
			t.Fatalf("verify after refresh: %+v, %v", rep, err)
		}
	})
}

func TestVerifyFindsDamagedAndMissingOutputs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, base := twoOwners(t, newRoot)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "alpha", "b.txt": "bravo", "c.txt": "charlie"})
		h.MustPublish(t1, pipeB, "tides", "tides.now", map[string]string{"t.txt": "tide"})
		rep, err := h.verify("latest", all)
		if err != nil || !rep.OK() || rep.Checked != 4 {
			t.Fatalf("verify of an intact root: %+v, %v", rep, err)
		}

		// One bit flipped, size kept: on disk directly, on S3 through a Put.
		if base.Backend == config.BackendLocal {
			name := filepath.Join(base.Path, "b.txt")
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			data[2] ^= 0x01
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			flipByte(t, root, "b.txt")
		}
		if got := mustRead(t, root, "b.txt"); len(got) != len("bravo") || got == "bravo" {
			t.Fatalf("b.txt = %q: not a same-size damage", got)
		}
		if err := root.Delete(context.Background(), "c.txt"); err != nil {
			t.Fatal(err)
		}
		v := catalogVersion(t, root)

		rep, err = h.verify("latest", all)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "damaged", rep.Damaged, []string{"b.txt"})
		wantStrings(t, "missing", rep.Missing, []string{"c.txt"})
		if rep.Checked != 4 || rep.OK() {
			t.Fatalf("report %+v", rep)
		}
		// Scoped to the other pipeline: nothing wrong there.
		rep, err = h.verify("tides", func(o catalog.Output) bool { return o.PipelineID == pipeB })
		if err != nil || !rep.OK() || rep.Checked != 1 {
			t.Fatalf("verify of %s: %+v, %v", pipeB, rep, err)
		}
		if got := catalogVersion(t, root); got != v {
			t.Fatalf("verify changed the catalog: %s -> %s", v, got)
		}
	})
}

func TestMaintenanceRefusesLegacyCatalog(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, _ := twoOwners(t, newRoot)
		legacy := putLegacyCatalog(t, root)
		mustPut(t, root, "today/index.html", "old")

		_, err := h.prune(t2, "latest", ownerA, t1, 0, false)
		if !errors.Is(err, engine.ErrLegacyCatalog) {
			t.Fatalf("prune: err = %v, want ErrLegacyCatalog", err)
		}
		_, err = h.prune(t2, "latest", ownerA, t1, 0, true)
		if !errors.Is(err, engine.ErrLegacyCatalog) {
			t.Fatalf("prune --dry-run: err = %v, want ErrLegacyCatalog", err)
		}
		_, err = h.reconcile(t2, "latest", planner.Selector{AllOwners: true}, true)
		if !errors.Is(err, engine.ErrLegacyCatalog) {
			t.Fatalf("reconcile: err = %v, want ErrLegacyCatalog", err)
		}
		_, err = h.verify("latest", all)
		if !errors.Is(err, engine.ErrLegacyCatalog) {
			t.Fatalf("verify: err = %v, want ErrLegacyCatalog", err)
		}
		if got := mustRead(t, root, catalog.FileName); got != string(legacy) {
			t.Fatalf("legacy catalog rewritten:\n%s", got)
		}
		wantContents(t, root, map[string]string{"today/index.html": "old"})
	})
}

func TestPruneKilledAtEveryStepConverges(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// The killed run's lock names a process that is gone; the rerun, on
	// the same host, sees that and takes the lock over at once.
	const deadPID = 1 << 22
	killedLocker := lease.NewStorageLocker("killed", time.Minute, lease.WithProcess(host, deadPID, func(int) bool { return true }))
	rerunLocker := lease.NewStorageLocker("rerun", time.Minute, lease.WithProcess(host, os.Getpid(), func(pid int) bool { return pid != deadPID }))
	pruneAt, cutoff := t2.Add(time.Hour), t2

	// Each prune (and each recovery of a killed one) reads the whole
	// catalog (a small root's way) and what it selects of a streamed one
	// (a large root's: engine.Engine.WholeCatalog).
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		for _, streamed := range []bool{false, true} {
			t.Run(map[bool]string{false: "whole", true: "streamed"}[streamed], func(t *testing.T) {
				// setup: ownerA has a, b, c (old) and d (at the cutoff); ownerB has e (old).
				setup := func(t *testing.T) (*harness, storage.Backend, config.Destination) {
					h, root, _ := twoOwners(t, newRoot)
					if streamed {
						h.Service.Engine.WholeCatalog = -1
					}
					h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "a", "b.txt": "b", "x/c.txt": "c"})
					h.MustPublish(t2, pipeA, "latest", "weatherreporter.tomorrow", map[string]string{"d.txt": "d"})
					h.MustPublish(t1, pipeB, "tides", "tides.now", map[string]string{"e.txt": "e"})
					d, _ := h.Config.Destination("latest")
					return h, root, d
				}
				snapshot := func(t *testing.T, root storage.Backend) map[string]string {
					s := contents(t, root)
					s[catalog.FileName] = mustRead(t, root, catalog.FileName)
					return s
				}

				// The uninterrupted run, counting its mutating calls.
				h, root, d := setup(t)
				counter := &dyingBackend{Backend: root}
				h.Stores.Add(d, counter)
				res, err := h.prune(pruneAt, "latest", ownerA, cutoff, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				wantStrings(t, "removed", removedPaths(res.Plan), []string{"a.txt", "b.txt", "x/c.txt"})
				want := snapshot(t, root)
				steps := counter.calls
				if steps < 7 { // lock, intent, 3 deletes, catalog, intent removal, unlock
					t.Fatalf("uninterrupted prune made %d mutating calls", steps)
				}

				for n := 1; n <= steps; n++ {
					h, root, d := setup(t)
					h.Stores.Add(d, &dyingBackend{Backend: root, killAt: n})
					h.Service.Locker = killedLocker
					_, killErr := h.prune(pruneAt, "latest", ownerA, cutoff, 0, false)

					h.Stores.Add(d, root)
					h.Service.Locker = rerunLocker
					if _, err := h.prune(pruneAt, "latest", ownerA, cutoff, 0, false); err != nil {
						t.Fatalf("killed at call %d (%v), rerun: %v", n, killErr, err)
					}
					if got := snapshot(t, root); !equalMaps(got, want) {
						t.Fatalf("killed at call %d (%v), after the rerun:\n%v\nwant\n%v", n, killErr, got, want)
					}
					assertDescribesStorage(t, root)
					if _, err := root.Stat(context.Background(), lease.LockPath); !errors.Is(err, storage.ErrNotExist) {
						t.Fatalf("killed at call %d: lock object left after the rerun: %v", n, err)
					}
				}
				t.Logf("killed at each of %d mutating calls; every rerun converged", steps)
			})
		}
	})
}
