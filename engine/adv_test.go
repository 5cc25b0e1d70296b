package engine_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// TestTornIntentIsClearedByTheNextRunThatIgnoresIt: a torn intent (a
// crash in the middle of its in-place rewrite) is ignored by the next run
// that holds the root's lease, and that run clears it, also when it has
// nothing to write (the same bundle again, or reconcile-state finding
// nothing to do): otherwise verify reports a pending recovery that no run
// ever finishes.
func TestTornIntentIsClearedByTheNextRunThatIgnoresIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	torn := append([]byte(`{"sha256":"00`), make([]byte, 300)...)
	for name, run := range map[string]func(t *testing.T, b *local.Backend) error{
		"same bundle again": func(t *testing.T, b *local.Backend) error {
			res, err := publish(t, b, planner.Replacement, dropFiles, fixedNow)
			if err == nil && (res.Recovered || len(res.Written) != 0) {
				t.Fatalf("the same bundle again: %+v", res)
			}
			return err
		},
		"reconcile-state": func(t *testing.T, b *local.Backend) error {
			e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
			res, err := e.Reconcile(ctx, b, heldLease{}, planner.Selector{AllOwners: true}, engine.ReconcileOptions{})
			if err == nil && res.Plan.Changed {
				t.Fatalf("reconcile of an intact root changed it: %+v", res.Plan)
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			b, _ := local.New(root)
			if _, err := publish(t, b, planner.Replacement, dropFiles, fixedNow); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), torn, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := run(t, b); err != nil {
				t.Fatalf("run after a torn intent: %v", err)
			}
			if intentPending(t, root) {
				t.Fatal("the torn intent is still there")
			}
			e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
			rep, err := e.Verify(ctx, b, all)
			if err != nil || !rep.OK() || rep.PendingRecovery {
				t.Fatalf("verify after the run: %+v, %v; want intact, no pending recovery", rep, err)
			}
		})
	}
}

// publishWith publishes files additively (no HTML) under lease l, as the
// event of now.
func publishWith(t *testing.T, root storage.Backend, l lease.Lease, files map[string]string, now time.Time) (engine.Result, error) {
	t.Helper()
	return runPublication(t, root, l, publicationSpec{workflow: planner.Additive, eventID: "ev-" + now.Format("150405")}, files, now)
}

// pausedAfterCommit is a root whose holder is paused (SIGSTOP, a long GC
// pause) right after its catalog commit returned, before it removes its
// intent.
type pausedAfterCommit struct {
	storage.Backend
	paused, resume chan struct{}
}

func (p *pausedAfterCommit) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return testenv.HookedCatalog{PendingCatalog: p.Backend.PrepareCatalog(ctx, next, writes), Hook: func(_ context.Context, commit func() (storage.Version, error)) (storage.Version, error) {
		v, err := commit()
		if err == nil {
			close(p.paused)
			<-p.resume
		}
		return v, err
	}}
}

// TestStaleHolderNeverEmptiesANewerHoldersIntent: a holder paused past its
// lease after its commit, before it empties its intent, must not empty
// the intent of the holder that took the root meanwhile: that holder's
// outputs were named under it, and if it dies before its commit, its
// retry needs the intent or it collides with its own bytes (unmanaged
// content).
func TestStaleHolderNeverEmptiesANewerHoldersIntent(t *testing.T) {
	t.Parallel()
	// Its lease seen lost, or not yet (a pause right after the check).
	for _, lose := range []bool{true, false} {
		t.Run(map[bool]string{true: "lease lost", false: "loss not seen yet"}[lose], func(t *testing.T) {
			t.Parallel()
			staleHolderNeverEmptiesANewerHoldersIntent(t, lose)
		})
	}
}

func staleHolderNeverEmptiesANewerHoldersIntent(t *testing.T, lose bool) {
	root := t.TempDir()
	lb, _ := local.New(root)
	if _, err := publishWith(t, lb, heldLease{}, map[string]string{"data/a.csv": "a1\n"}, fixedNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	stale := &pausedAfterCommit{Backend: lb, paused: make(chan struct{}), resume: make(chan struct{})}
	sl := &switchLease{}
	staleDone := make(chan error, 1)
	go func() {
		_, err := publishWith(t, stale, sl, map[string]string{"data/a.csv": "a2\n"}, fixedNow.Add(-30*time.Minute))
		staleDone <- err
	}()
	<-stale.paused
	if lose {
		sl.lose()
	}
	// The newer holder: its intent, then its new output, then killed
	// before its commit.
	newer := map[string]string{"data/a.csv": "a2\n", "data/c.csv": "c\n"}
	dying := &dyingBackend{Backend: lb, atCommit: true}
	if _, err := publishWith(t, dying, heldLease{}, newer, fixedNow); !errors.Is(err, errKilled) {
		t.Fatalf("newer holder: %v, want killed", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data/c.csv")); err != nil {
		t.Fatalf("the newer holder's output should have landed: %v", err)
	}
	if cat, err := os.ReadFile(filepath.Join(root, catalog.FileName)); err != nil || bytes.Contains(cat, []byte("data/c.csv")) {
		t.Fatalf("the newer holder was killed before its commit: catalog %v", err)
	}
	close(stale.resume)
	if err := <-staleDone; err != nil {
		t.Logf("stale holder: %v", err)
	}
	if !intentPending(t, root) {
		t.Fatal("the stale holder emptied the newer holder's intent")
	}
	res, err := publishWith(t, lb, heldLease{}, newer, fixedNow)
	if err != nil || len(res.Plan.Collisions) != 0 || !res.Recovered {
		t.Fatalf("retry of the newer holder: %v, collisions %v, recovered %v", err, res.Plan.Collisions, res.Recovered)
	}
}

// pausingLease holds its holder at the lease check that precedes the
// intent's write (putIntent) and then reports the lease as it was when
// checked: a holder paused right after that check.
type pausingLease struct {
	switchLease
	once           sync.Once
	paused, resume chan struct{}
}

func (l *pausingLease) Err() error {
	err := l.switchLease.Err()
	pcs := make([]uintptr, 8)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for f, more := frames.Next(); more; f, more = frames.Next() {
		if strings.HasSuffix(f.Function, "engine.putIntent") {
			l.once.Do(func() {
				close(l.paused)
				<-l.resume
			})
			break
		}
	}
	return err
}

// TestStaleHolderNeverRewritesANewerHoldersIntent: a holder paused past
// its lease right before it rewrites the intent in place must not replace
// the intent of the holder that took the root meanwhile and named outputs
// under it: if that holder dies before its commit, its retry needs its
// intent or it collides with its own bytes.
func TestStaleHolderNeverRewritesANewerHoldersIntent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	lb, _ := local.New(root)
	if _, err := publishWith(t, lb, heldLease{}, map[string]string{"data/a.csv": "a1\n"}, fixedNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	sl := &pausingLease{paused: make(chan struct{}), resume: make(chan struct{})}
	staleDone := make(chan error, 1)
	go func() {
		_, err := publishWith(t, lb, sl, map[string]string{"data/a.csv": "a2\n", "data/s.csv": "s\n"}, fixedNow.Add(-30*time.Minute))
		staleDone <- err
	}()
	<-sl.paused
	newer := map[string]string{"data/a.csv": "a3\n", "data/c.csv": "c\n"}
	dying := &dyingBackend{Backend: lb, atCommit: true}
	if _, err := publishWith(t, dying, heldLease{}, newer, fixedNow); !errors.Is(err, errKilled) {
		t.Fatalf("newer holder: %v, want killed", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data/c.csv")); err != nil {
		t.Fatalf("the newer holder's output should have landed: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)))
	if err != nil || len(want) == 0 {
		t.Fatalf("the newer holder's intent: %v", err)
	}
	sl.lose()
	close(sl.resume)
	if err := <-staleDone; err == nil {
		t.Fatal("the stale holder's publication succeeded")
	}
	if got, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath))); !bytes.Equal(got, want) {
		t.Fatalf("the stale holder replaced the newer holder's intent:\n%s", got)
	}
	res, err := publishWith(t, lb, heldLease{}, newer, fixedNow)
	if err != nil || len(res.Plan.Collisions) != 0 || !res.Recovered {
		t.Fatalf("retry of the newer holder: %v, collisions %v, recovered %v", err, res.Plan.Collisions, res.Recovered)
	}
	if _, err := os.Stat(filepath.Join(root, "data/s.csv")); err == nil {
		t.Fatal("the stale holder wrote an output")
	}
}

// raceAtCommit is a local root where another writer commits the catalog
// (the same records, updated a second later) after the publication prepared its
// catalog and before it commits it.
type raceAtCommit struct{ *local.Backend }

func (r raceAtCommit) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return racedPending{r.Backend.PrepareCatalog(ctx, next, writes), r.Backend}
}

type racedPending struct {
	storage.PendingCatalog
	b *local.Backend
}

func (pc racedPending) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	if _, err := commitAnotherCatalog(ctx, pc.b); err != nil {
		return "", err
	}
	return pc.PendingCatalog.Commit(ctx, want)
}

// TestPreparedCatalogLosingTheRaceLeavesNothingAndConverges: a catalog
// commit that another writer's commit overtook after the prepare fails
// as a race (retried), leaves no temp file and keeps the intent, and the
// retry ends byte for byte where an uninterrupted run ends.
func TestPreparedCatalogLosingTheRaceLeavesNothingAndConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := tornNextReference(t)
	root := publishedDropFiles(t)
	b, _ := local.New(root)
	if _, err := publish(t, raceAtCommit{b}, planner.Replacement, tornNext, fixedNow); !errors.Is(err, engine.ErrCatalogRace) {
		t.Fatalf("publication overtaken at its commit: %v, want ErrCatalogRace", err)
	}
	e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
	rep, err := e.Verify(ctx, b, all)
	if err != nil || rep.Leftovers.Count != 0 || !rep.PendingRecovery {
		t.Fatalf("after the lost race: %+v, %v; want no leftover and the intent pending", rep, err)
	}
	res, err := publish(t, b, planner.Replacement, tornNext, fixedNow)
	if err != nil || !res.Recovered {
		t.Fatalf("retry: %v, recovered %v", err, res.Recovered)
	}
	if d := diff(snapshot(t, root), want); d != "" {
		t.Fatalf("the retry ends elsewhere:\n%s", d)
	}
}
