package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// flushOrder is a local root that checks the rule that makes a deferred
// intent removal safe: no catalog commit while a removal may not be
// durable, i.e. every commit follows a Sync, a durable removal or a durable
// intent of its own since the last deferred removal.
type flushOrder struct {
	*local.Backend
	t        *testing.T
	mu       sync.Mutex
	pending  bool // an intent removal that no flush covers yet
	deferred int  // deferred intent removals
	commits  int
	removed  []byte // the last removed intent's bytes
}

func (f *flushOrder) set(pending bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = pending
}

func (f *flushOrder) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	v, err := f.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
	if err == nil {
		f.set(false) // replaces the cleared one, durably
	}
	return v, err
}

func (f *flushOrder) hookClearIntent(ctx context.Context, want storage.Version) error {
	data, err := os.ReadFile(filepath.Join(f.String(), filepath.FromSlash(engine.IntentPath)))
	if err != nil || len(data) == 0 {
		f.t.Errorf("deferred removal of an intent that is not there: %v", err)
	}
	f.mu.Lock()
	f.removed, f.pending = data, true
	f.deferred++
	f.mu.Unlock()
	return f.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

func (f *flushOrder) Sync(ctx context.Context) error {
	f.mu.Lock()
	was := f.pending
	f.mu.Unlock()
	err := f.Backend.Sync(ctx)
	if err == nil && was {
		f.set(false)
	}
	return err
}

// PrepareCatalog: a catalog is checked when it is committed.
func (f *flushOrder) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return orderedCommit{f.Backend.PrepareCatalog(ctx, next, writes), f}
}

type orderedCommit struct {
	storage.PendingCatalog
	f *flushOrder
}

func (o orderedCommit) Commit(ctx context.Context, v storage.Version) (storage.Version, error) {
	o.f.mu.Lock()
	o.f.commits++
	if o.f.pending {
		o.f.t.Errorf("catalog commit %d while an intent removal may not be durable", o.f.commits)
	}
	o.f.mu.Unlock()
	return o.PendingCatalog.Commit(ctx, v)
}

func newFlushOrder(t *testing.T, root string) *flushOrder {
	b, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return &flushOrder{Backend: b, t: t}
}

var dropFiles = map[string]string{"data/a.csv": "a\n", "data/b.csv": "b\n"}

// TestEveryCommitAfterADeferredIntentRemovalFollowsAFlush: the intent of a
// committed run is removed without a flush (dropIntent), so every later
// commit must come after a flush (or a durable intent of its own):
// publications that write, that only update records, prune and reconcile.
func TestEveryCommitAfterADeferredIntentRemovalFollowsAFlush(t *testing.T) {
	root := t.TempDir()
	f := newFlushOrder(t, root)
	ctx := context.Background()
	steps := []struct {
		name string
		run  func() error
	}{
		{"first publication", func() error {
			_, err := publish(t, f, planner.Additive, dropFiles, fixedNow.Add(-3*time.Hour))
			return err
		}},
		{"update of records only", func() error {
			res, err := publish(t, f, planner.Additive, dropFiles, fixedNow.Add(-2*time.Hour))
			if err == nil && (len(res.Written) != 0 || len(res.Updated) != 2) {
				t.Fatalf("republish of the same bytes wrote %d and updated %d records, want 0 and 2", len(res.Written), len(res.Updated))
			}
			return err
		}},
		{"publication adding a file", func() error {
			_, err := publish(t, f, planner.Additive, map[string]string{"data/c.csv": "c\n"}, fixedNow.Add(-time.Hour))
			return err
		}},
		{"prune", func() error {
			e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test", Workers: 1}
			res, err := e.Prune(ctx, f, heldLease{}, catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"},
				engine.PruneOptions{Cutoff: fixedNow.Add(-90 * time.Minute)})
			if err == nil && len(res.Plan.Removed) != 2 {
				t.Fatalf("prune removed %d outputs, want 2", len(res.Plan.Removed))
			}
			return err
		}},
		{"reconcile", func() error {
			if err := os.Remove(filepath.Join(root, "data", "c.csv")); err != nil {
				return err
			}
			e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test", Workers: 1}
			_, err := e.Reconcile(ctx, f, heldLease{}, planner.Selector{AllOwners: true}, engine.ReconcileOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if f.commits != len(steps) || f.deferred != 3 {
		t.Fatalf("%d commits and %d deferred intent removals, want %d and 3", f.commits, f.deferred, len(steps))
	}
}

// TestIntentBackAfterALostRemovalChangesNothing: a power loss that undoes
// an intent's deferred removal brings back the intent of a run that
// committed; the next run rolls it forward before its own work, and ends
// with exactly the root of a run that never saw it.
func TestIntentBackAfterALostRemovalChangesNothing(t *testing.T) {
	for _, next := range []struct {
		name  string
		files map[string]string
	}{
		{"update of records only", dropFiles},
		{"new bytes and a removed file", map[string]string{"data/a.csv": "a2\n"}},
	} {
		t.Run(next.name, func(t *testing.T) {
			roots := [2]string{t.TempDir(), t.TempDir()}
			for i, root := range roots {
				f := newFlushOrder(t, root)
				if _, err := publish(t, f, planner.Replacement, dropFiles, fixedNow.Add(-time.Hour)); err != nil {
					t.Fatal(err)
				}
				if i == 0 { // the removal is lost: the intent is back
					if len(f.removed) == 0 {
						t.Fatal("the publication removed no intent")
					}
					if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), f.removed, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := publish(t, f, planner.Replacement, next.files, fixedNow); err != nil {
					t.Fatal(err)
				}
				if data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath))); err == nil && len(data) > 0 {
					t.Fatalf("root %d: an intent is left", i)
				}
			}
			if d := diff(snapshot(t, roots[0]), snapshot(t, roots[1])); d != "" {
				t.Fatalf("with the intent back, the next run ends elsewhere:\n%s", d)
			}
		})
	}
}

// Dispatch of the contract's calls to the hooks above.

func (f *flushOrder) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return f.hookWriteIntent(ctx, data)
	}
	return f.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}

func (f *flushOrder) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return f.hookClearIntent(ctx, want)
	}
	return f.Backend.DeleteIfVersion(ctx, p, want, opts...)
}
