package engine_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// readOnlyRoot fails every write as a read-only mount does (EROFS, as
// storage/local reports it) and counts the attempts.
type readOnlyRoot struct {
	storage.Backend
	writes atomic.Int32
}

func (r *readOnlyRoot) denied(p string) error {
	r.writes.Add(1)
	return local.Classify(r.String(), &fs.PathError{Op: "open", Path: p, Err: syscall.EROFS})
}

func (r *readOnlyRoot) hookPut(_ context.Context, p string, _ io.Reader, _ int64, _ storage.PutOptions) (storage.ObjectInfo, error) {
	return storage.ObjectInfo{}, r.denied(p)
}

func (r *readOnlyRoot) Delete(_ context.Context, paths ...string) error { return r.denied(paths[0]) }

func (r *readOnlyRoot) hookWriteIfVersion(_ context.Context, p string, _ []byte, _ storage.Version, opts ...storage.Option) (storage.Version, error) {
	return "", r.denied(p)
}

func (r *readOnlyRoot) hookDeleteIfVersion(_ context.Context, p string, _ storage.Version, opts ...storage.Option) error {
	return r.denied(p)
}

func (r *readOnlyRoot) hookWriteNoSync(_ context.Context, p string, _ []byte, _ storage.Version) (storage.Version, error) {
	return "", r.denied(p)
}

func (r *readOnlyRoot) hookDeleteNoSync(_ context.Context, p string, _ storage.Version) error {
	return r.denied(p)
}

func (r *readOnlyRoot) hookOverwrite(_ context.Context, p string, _ []byte) error { return r.denied(p) }

func (r *readOnlyRoot) hookWriteIntent(context.Context, []byte) (storage.Version, error) {
	return "", r.denied(engine.IntentPath)
}

func (r *readOnlyRoot) hookClearIntent(context.Context, storage.Version) error {
	return r.denied(engine.IntentPath)
}

func (r *readOnlyRoot) Stage(context.Context) storage.Stage { return readOnlyStage{r} }

func (r *readOnlyRoot) PrepareCatalog(context.Context, storage.Document, int) storage.PendingCatalog {
	return readOnlyCatalog{r}
}

func (r *readOnlyRoot) RemoveLeftovers(context.Context, []storage.Leftover) error {
	return r.denied(".")
}

type readOnlyStage struct{ r *readOnlyRoot }

func (s readOnlyStage) Put(_ context.Context, p string, _ storage.Source, _ int64, _ storage.PutOptions) (storage.ObjectInfo, error) {
	return storage.ObjectInfo{}, s.r.denied(p)
}

func (s readOnlyStage) Commit(_ context.Context, p string) (storage.ObjectInfo, error) {
	return storage.ObjectInfo{}, s.r.denied(p)
}

func (readOnlyStage) Close() error { return nil }

type readOnlyCatalog struct{ r *readOnlyRoot }

func (c readOnlyCatalog) Commit(context.Context, storage.Version) (storage.Version, error) {
	return "", c.r.denied(catalog.FileName)
}

func (readOnlyCatalog) Close() error { return nil }

// TestVerifyReadOnlyReportsPendingRecovery: verify never writes, so it
// checks a read-only root; an interrupted publication there is reported
// as a pending recovery and left for the next run, which finishes it.
func TestVerifyReadOnlyReportsPendingRecovery(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		root, _ := newRoot(t)
		v1 := map[string]string{"a.txt": "a1\n", "b.txt": "b1\n"}
		if _, err := publish(t, root, planner.Additive, v1, fixedNow); err != nil {
			t.Fatal(err)
		}
		e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
		ro := &readOnlyRoot{Backend: root}
		rep, err := e.Verify(ctx, ro, all)
		if err != nil || !rep.OK() || rep.Checked != 2 || rep.PendingRecovery {
			t.Fatalf("verify of an intact read-only root: %+v, %v", rep, err)
		}

		// Killed after its intent and first output landed (two outputs
		// staged, the intent, the catalog prepared, one output named).
		dying := dyingOn(root, 6)
		if _, err := publish(t, dying, planner.Additive, map[string]string{"a.txt": "a2\n", "b.txt": "b2\n"}, fixedNow.Add(time.Minute)); !errors.Is(err, errKilled) {
			t.Fatalf("interrupted run: %v", err)
		}
		intent, iv, err := engine.ReadIntent(ctx, root)
		if err != nil || intent == nil {
			t.Fatalf("no intent after the interrupted run: %v", err)
		}
		cv := catalogVersion(t, root)

		rep, err = e.Verify(ctx, ro, all)
		if err != nil {
			t.Fatalf("verify of a read-only root with a pending recovery: %v", err)
		}
		if !rep.PendingRecovery || rep.Checked != 2 || len(rep.Missing) != 0 {
			t.Fatalf("report %+v, want a pending recovery and 2 checked", rep)
		}
		// The catalog as is: the landed output of the interrupted run
		// differs from its record, which its intent explains.
		wantStrings(t, "in flight", rep.InFlight, []string{"a.txt"})
		wantStrings(t, "damaged", rep.Damaged, nil)
		if n := ro.writes.Load(); n != 0 {
			t.Fatalf("verify tried %d write(s)", n)
		}
		if _, v, _ := engine.ReadIntent(ctx, root); v != iv {
			t.Fatal("verify changed the intent")
		}
		if got := catalogVersion(t, root); got != cv {
			t.Fatalf("verify changed the catalog: %s -> %s", cv, got)
		}

		// The next run on the root finishes it; verify then finds it clean.
		if _, err := e.Recover(ctx, root, heldLease{}); err != nil {
			t.Fatal(err)
		}
		rep, err = e.Verify(ctx, ro, all)
		if err != nil || !rep.OK() || rep.PendingRecovery || rep.Checked != 2 {
			t.Fatalf("verify after recovery: %+v, %v", rep, err)
		}
	})
}

// racingRoot commits a catalog change (as a concurrent publication
// would) the first time verify opens an output.
type racingRoot struct {
	storage.Backend
	once atomic.Bool
	race func()
}

func (r *racingRoot) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if r.once.CompareAndSwap(false, true) {
		r.race()
	}
	return r.Backend.Open(ctx, p, opts...)
}

// TestVerifyDuringPublicationAsksToRunAgain: verify takes no lease, so a
// publication that commits while it reads would look like damage; verify
// notices the catalog changed and fails transiently instead.
func TestVerifyDuringPublicationAsksToRunAgain(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		root, _ := newRoot(t)
		if _, err := publish(t, root, planner.Additive, map[string]string{"a.txt": "a1\n"}, fixedNow); err != nil {
			t.Fatal(err)
		}
		rr := &racingRoot{Backend: root, race: func() {
			if _, err := publish(t, root, planner.Additive, map[string]string{"a.txt": "a2\n"}, fixedNow.Add(time.Minute)); err != nil {
				t.Error(err)
			}
		}}
		e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
		rep, err := e.Verify(context.Background(), rr, all)
		if !errors.Is(err, storage.ErrConflict) || !service.Classify(err).Retry {
			t.Fatalf("verify during a publication: %+v, %v; want a retryable ErrConflict", rep, err)
		}
		want := "verify " + root.String() + ": a publication changed the root while verify read it: object changed since it was read; run verify again"
		if err.Error() != want {
			t.Fatalf("message\n got %s\nwant %s", err, want)
		}
	})
}

// fullDisk fails every write with ENOSPC once full is set; the stage sets
// it at its commit number fillAt (that commit fails too).
type fullDisk struct {
	storage.Backend
	fillAt  int32
	commits atomic.Int32
	full    atomic.Bool
}

func (d *fullDisk) nospace(p string) error {
	if !d.full.Load() {
		return nil
	}
	return local.Classify(d.String(), &fs.PathError{Op: "write", Path: p, Err: syscall.ENOSPC})
}

func (d *fullDisk) hookPut(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	if err := d.nospace(p); err != nil {
		return storage.ObjectInfo{}, err
	}
	return d.Backend.Put(ctx, p, r, size, o)
}

func (d *fullDisk) hookOverwrite(ctx context.Context, p string, data []byte) error {
	if err := d.nospace(p); err != nil {
		return err
	}
	return putInPlace(ctx, d.Backend, p, data)
}

func (d *fullDisk) hookWriteIfVersion(ctx context.Context, p string, data []byte, v storage.Version, opts ...storage.Option) (storage.Version, error) {
	if err := d.nospace(p); err != nil {
		return "", err
	}
	return d.Backend.WriteIfVersion(ctx, p, data, v, opts...)
}

func (d *fullDisk) Stage(ctx context.Context) storage.Stage {
	return hookedStage(d.Backend.Stage(ctx), func(_ context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		if d.commits.Add(1) >= d.fillAt {
			d.full.Store(true)
		}
		if err := d.nospace(p); err != nil {
			return storage.ObjectInfo{}, err
		}
		return commit()
	})
}

func (d *fullDisk) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return testenv.HookedCatalog{PendingCatalog: d.Backend.PrepareCatalog(ctx, next, writes), Hook: func(_ context.Context, commit func() (storage.Version, error)) (storage.Version, error) {
		if err := d.nospace(catalog.FileName); err != nil {
			return "", err
		}
		return commit()
	}}
}

// TestVerifyAfterAFullDiskReportsInFlight: a publication stopped by a full
// disk, after some of its outputs landed and before any catalog could
// record them, leaves its intent; until the next run recovers it, verify
// reports those outputs in flight (run again later), not damaged, while
// real damage elsewhere is still damage.
func TestVerifyAfterAFullDiskReportsInFlight(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		root, _ := newRoot(t)
		v1 := map[string]string{"a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n", "d.txt": "d1\n", "z.txt": "z1\n"}
		if _, err := publish(t, root, planner.Additive, v1, fixedNow); err != nil {
			t.Fatal(err)
		}
		// Outputs are staged, then named one by one: the disk fills at the third.
		disk := &fullDisk{Backend: root, fillAt: 3}
		v2 := map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "c.txt": "c2\n", "d.txt": "d2\n"}
		if _, err := publish(t, disk, planner.Additive, v2, fixedNow.Add(time.Minute)); !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("publication on a full disk: %v", err)
		}
		if !intentPendingOn(t, root) {
			t.Fatal("no intent after the publication the full disk stopped")
		}
		var landed []string
		for _, p := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
			if mustRead(t, root, p) == v2[p] {
				landed = append(landed, p)
			}
		}
		if len(landed) != 2 {
			t.Fatalf("landed %q, want 2 outputs", landed)
		}
		// Damage no publication explains.
		flipByte(t, root, "z.txt")

		e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
		rep, err := e.Verify(ctx, root, all)
		if err != nil || !rep.PendingRecovery || rep.Checked != 5 {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
		wantStrings(t, "in flight", rep.InFlight, landed)
		wantStrings(t, "damaged", rep.Damaged, []string{"z.txt"})
		wantStrings(t, "missing", rep.Missing, nil)

		// The next run recovers it: nothing in flight, the damage stays.
		if _, err := e.Recover(ctx, root, heldLease{}); err != nil {
			t.Fatal(err)
		}
		rep, err = e.Verify(ctx, root, all)
		if err != nil || rep.PendingRecovery || len(rep.InFlight) != 0 {
			t.Fatalf("verify after recovery: %+v, %v", rep, err)
		}
		wantStrings(t, "damaged after recovery", rep.Damaged, []string{"z.txt"})
	})
}

// intentPendingOn reports whether root holds an intent.
func intentPendingOn(t *testing.T, root storage.Backend) bool {
	t.Helper()
	data, _, err := engine.ReadIntent(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return data != nil
}

// Dispatch of the contract's calls to the hooks above.

func (r *readOnlyRoot) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return r.hookWriteIntent(ctx, data)
	}
	if storage.HasOption(opts, storage.DeferSync) {
		return r.hookWriteNoSync(ctx, p, data, want)
	}
	return r.hookWriteIfVersion(ctx, p, data, want, opts...)
}

func (r *readOnlyRoot) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return r.hookClearIntent(ctx, want)
	}
	if storage.HasOption(opts, storage.DeferSync) {
		return r.hookDeleteNoSync(ctx, p, want)
	}
	return r.hookDeleteIfVersion(ctx, p, want, opts...)
}

// Put takes the in-place writes to hookOverwrite.
func (r *readOnlyRoot) Put(ctx context.Context, p string, body io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if opts.InPlace {
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.ObjectInfo{}, err
		}
		return storage.ObjectInfo{Path: p, Size: int64(len(data))}, r.hookOverwrite(ctx, p, data)
	}
	return r.hookPut(ctx, p, body, size, opts)
}

func (d *fullDisk) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {

	return d.hookWriteIfVersion(ctx, p, data, want, opts...)
}

// Put takes the in-place writes to hookOverwrite.
func (d *fullDisk) Put(ctx context.Context, p string, body io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if opts.InPlace {
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.ObjectInfo{}, err
		}
		return storage.ObjectInfo{Path: p, Size: int64(len(data))}, d.hookOverwrite(ctx, p, data)
	}
	return d.hookPut(ctx, p, body, size, opts)
}
