package engine_test

// A holder that is alive but paused (SIGSTOP) while an operator breaks its
// lock with `distributor unlock --id`, as the "held" error suggests: a
// newer holder publishes, then the paused one resumes. Whatever of its
// bytes still lands, no commit records them, its own recovery's included,
// and the next holder's roll forward of its intent keeps the newer records.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// stepPausing holds the first WriteIntent (atIntent) or the first Sync
// until resumed: a holder paused after planning and staging its writes,
// before anything is visible, or with its writes landed, right before
// its commit.
type stepPausing struct {
	storage.Backend
	atIntent        bool
	reached, resume chan struct{}
	paused          bool
}

func (p *stepPausing) pause(here bool) {
	if here && !p.paused {
		p.paused = true
		close(p.reached)
		<-p.resume
	}
}

func (p *stepPausing) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	p.pause(p.atIntent)
	return p.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
}

func (p *stepPausing) Sync(ctx context.Context) error {
	p.pause(!p.atIntent)
	return p.Backend.Sync(ctx)
}

// unlockVersions are the three versions of the race: v0 published first;
// v1 (the paused holder's) changes every path; v2 keeps v1's bytes on all
// paths but one and leaves "a-kept.txt" as v0 had it, so the paused
// holder's write of that path still finds the version it planned over.
func unlockVersions() (v0, v1, v2 map[string]string) {
	v0, v1, v2 = map[string]string{}, map[string]string{}, map[string]string{}
	for i := range 12 {
		p := fmt.Sprintf("p%02d.txt", i)
		v0[p], v1[p], v2[p] = "v0 "+p+"\n", "v1 "+p+"\n", "v1 "+p+"\n"
	}
	v2["p05.txt"] = "v2 p05.txt\n"
	v0["a-kept.txt"], v1["a-kept.txt"], v2["a-kept.txt"] = "v0 a\n", "v1 a\n", "v0 a\n"
	return v0, v1, v2
}

func TestUnlockedPausedHolderCommitsNothingOverANewerVersion(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		// Paused before its intent, its write of a-kept.txt lands after
		// v2's commit and is damage; paused before its commit, its writes
		// landed before v2's run, which rolls its intent forward first.
		t.Run("before its intent", func(t *testing.T) { unlockedPausedHolder(t, newRoot, true, []string{"a-kept.txt"}) })
		t.Run("before its commit", func(t *testing.T) { unlockedPausedHolder(t, newRoot, false, nil) })
	})
}

func unlockedPausedHolder(t *testing.T, newRoot newRootFunc, atIntent bool, slipped []string) {
	{
		ctx := context.Background()
		h := newHarness(t)
		plain, base := newRoot(t)
		d := h.AddDest(named(base, "site", planner.Replacement), plain, pipeA)
		v0, v1, v2 := unlockVersions()
		h.MustPublish(t1, pipeA, "site", "weatherreporter.v", v0)
		v1Dir, v1Digest := makeBundleAt(t, "weatherreporter.v", t0.Add(1*time.Minute), v1)
		v2Dir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(2*time.Minute), v2)
		h.Clock.Set(t2)
		root := lease.Root{Key: d.RootKey(), Store: plain, Destination: d.ID}

		// Holder A (v1) pauses with its writes staged.
		la, err := lease.NewStorageLocker("holder-a", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		defer la.Release(ctx)
		pausing := &stepPausing{Backend: plain, atIntent: atIntent, reached: make(chan struct{}), resume: make(chan struct{})}
		errA := make(chan error, 1)
		go func() {
			_, err := h.fenceHolder(ctx, pausing, la, d, v1Dir, 1)
			errA <- err
		}()
		waitClosed(t, pausing.reached, "holder A's pause")

		// The operator breaks A's lock by its id; holder B publishes v2.
		held, err := lease.ReadLock(ctx, plain, time.Now())
		if err != nil || held == nil {
			t.Fatalf("read lock: %v, %v", held, err)
		}
		if _, err := lease.UnlockObject(ctx, plain, held.ID); err != nil {
			t.Fatal(err)
		}
		lb, err := lease.NewStorageLocker("holder-b", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.fenceHolder(ctx, plain, lb, d, v2Dir, 4); err != nil {
			t.Fatalf("holder B: %v", err)
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// A resumes: its run fails with the lost lease and records nothing.
		close(pausing.resume)
		err = <-errA
		wantNoRecordOf(t, plain, v1Digest, "after holder A resumed")
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("holder A: %v, want the lost lease", err)
		}
		rep, err := h.verify("site", all)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "damaged by holder A's writes that slipped through", rep.Damaged, slipped)

		// The next publication rolls what A left forward without recording
		// it over v2, and repairs the bytes that slipped through.
		res, err := h.Publish(t2.Add(time.Minute), pipeA, "site", v2Dir)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written by the next publication", itemPaths(res.Written), slipped)
		wantNoRecordOf(t, plain, v1Digest, "after the next publication")
		wantContents(t, plain, v2)
		assertDescribesStorage(t, plain)
		if rep, err := h.verify("site", all); err != nil || !rep.OK() {
			t.Fatalf("verify after the repair: %+v, %v", rep, err)
		}
	}
}

// Dispatch of the contract's calls to the hooks above.

func (p *stepPausing) WriteIfVersion(ctx context.Context, name string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if name == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return p.hookWriteIntent(ctx, data)
	}
	return p.Backend.WriteIfVersion(ctx, name, data, want, opts...)
}
