package engine_test

// Fencing of data writes: a holder that lost its lease while a write was in
// flight (a paused process, a hung request) must not land that write on a
// newer holder's work, and where it still lands on a path the newer holder
// left alone, the next publication must notice and repair it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// switchLease is held until lose is called: the tests decide when a
// holder's lease runs out, the lease package's own tests prove it does.
type switchLease struct{ lost atomic.Bool }

func (l *switchLease) Token() string { return "1" }
func (l *switchLease) Err() error {
	if l.lost.Load() {
		return fmt.Errorf("%w: test lease expired", lease.ErrLost)
	}
	return nil
}
func (l *switchLease) Release(context.Context) error { return nil }
func (l *switchLease) Confirm(context.Context) error { return l.Err() }
func (l *switchLease) lose()                         { l.lost.Store(true) }

// pausingBackend holds the first Put of one path until resumed, as a
// SIGSTOP or a hung request would: the write has passed every check of the
// holder and is on its way to storage.
type pausingBackend struct {
	storage.Backend
	path    string
	once    sync.Once
	reached chan struct{}
	resume  chan struct{}
	// result is the paused Put's error, once it ran.
	result chan error
}

func newPausing(b storage.Backend, path string) *pausingBackend {
	return &pausingBackend{Backend: b, path: path, reached: make(chan struct{}), resume: make(chan struct{}), result: make(chan error, 1)}
}

func (p *pausingBackend) Put(ctx context.Context, path string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	paused := false
	if path == p.path {
		p.once.Do(func() { paused = true })
	}
	if !paused {
		return p.Backend.Put(ctx, path, r, size, o)
	}
	close(p.reached)
	<-p.resume
	oi, err := p.Backend.Put(ctx, path, r, size, o)
	p.result <- err
	return oi, err
}

// pausingStager is a pausingBackend over a backend that stages writes:
// the Commit of the path is held instead (the bytes are staged and
// verified; naming them is all that is left).
type pausingStager struct{ *pausingBackend }

func (p pausingStager) Stage(ctx context.Context) storage.Stage {
	return &pausingStage{Stage: p.Backend.Stage(ctx), p: p.pausingBackend}
}

type pausingStage struct {
	storage.Stage
	p *pausingBackend
}

func (s *pausingStage) Commit(ctx context.Context, path string) (storage.ObjectInfo, error) {
	paused := false
	if path == s.p.path {
		s.p.once.Do(func() { paused = true })
	}
	if !paused {
		return s.Stage.Commit(ctx, path)
	}
	close(s.p.reached)
	<-s.p.resume
	oi, err := s.Stage.Commit(ctx, path)
	s.p.result <- err
	return oi, err
}

// fenceHolder publishes bundle dir to d's root as one holder with its own
// lease, the way the service does once the lease is held.
func (h *harness) fenceHolder(ctx context.Context, root storage.Backend, l lease.Lease, d config.Destination, dir string, workers int) (engine.Result, error) {
	req := service.Request{PipelineID: pipeA, Bundle: dir, Destinations: []string{d.ID}, BundleEventID: "ev-" + dir}
	b, err := h.Service.OpenBundle(ctx, req)
	if err != nil {
		return engine.Result{}, err
	}
	pub, err := service.PublicationTo(ctx, d, pipeA, b)
	pub.BundleEventID = req.BundleEventID
	if err != nil {
		return engine.Result{}, err
	}
	e := &engine.Engine{Now: h.Clock.Now, Version: "test", Workers: workers}
	return e.Publish(ctx, root, l, pub)
}

func eight(version string) map[string]string {
	files := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		files[n+".txt"] = version + " " + n + "\n"
	}
	return files
}

// staleRace is the race of these tests: holder A publishes staleDir one
// output at a time and is paused inside the write of path; its lease runs
// out; holder B publishes newerDir to the same root; then A resumes. It
// returns the paused write's error and A's publication error.
func (h *harness) staleRace(t *testing.T, plain storage.Backend, d config.Destination, path, staleDir, newerDir string) (paused, stale error) {
	t.Helper()
	ctx := context.Background()
	pausing := newPausing(plain, path)
	la := &switchLease{}
	errA := make(chan error, 1)
	rootA := pausingStager{pausing}
	go func() {
		_, err := h.fenceHolder(ctx, rootA, la, d, staleDir, 1)
		errA <- err
	}()
	waitClosed(t, pausing.reached, "the stale holder's paused write of "+path)
	la.lose()
	if _, err := h.fenceHolder(ctx, plain, &switchLease{}, d, newerDir, 4); err != nil {
		t.Fatalf("newer holder: %v", err)
	}
	close(pausing.resume)
	return <-pausing.result, <-errA
}

// The newer holder rewrote the path the stale holder was writing (and both
// create a new path): the stale writes are refused, verify passes, the
// newer holder's bytes are live.
func TestStaleWriterNeverLandsOnANewerHoldersWrites(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		staleWriterNeverLands(t, newRoot)
	})
}

func staleWriterNeverLands(t *testing.T, newRoot newRootFunc) {
	{
		h := newHarness(t)
		plain, base := newRoot(t)
		d := h.AddDest(named(base, "site", planner.Replacement), plain, pipeA)
		h.MustPublish(t1, pipeA, "site", "weatherreporter.v", eight("v0"))

		stale := eight("stale")
		stale["new.txt"] = "stale new\n"
		staleDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(1*time.Minute), stale)
		newer := eight("newer")
		newer["new.txt"] = "newer new\n"
		newerDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(2*time.Minute), newer)

		// Holder A is paused inside the write of c.txt past its lease while
		// holder B publishes; then A resumes.
		h.Clock.Set(t2)
		pausedErr, staleErr := h.staleRace(t, plain, d, "c.txt", staleDir, newerDir)
		if !errors.Is(pausedErr, storage.ErrConflict) {
			t.Fatalf("stale Put of c.txt: err = %v, want ErrConflict (it must not land)", pausedErr)
		}
		if staleErr == nil {
			t.Fatal("stale holder's publication succeeded")
		}
		wantContents(t, plain, newer)
		rep, err := h.verify("site", all)
		if err != nil || !rep.OK() {
			t.Fatalf("verify after the stale writer resumed: %+v, %v", rep, err)
		}

		// The same race on a path both create: no-replace refuses the stale one.
		withFresh := func(files map[string]string, v string) map[string]string {
			out := map[string]string{"fresh.txt": v + " fresh\n"}
			for k, c := range files {
				out[k] = c
			}
			return out
		}
		staleDir2, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(3*time.Minute), withFresh(newer, "stale"))
		newerFiles := withFresh(newer, "newer")
		newerDir2, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(4*time.Minute), newerFiles)
		if paused, _ := h.staleRace(t, plain, d, "fresh.txt", staleDir2, newerDir2); !errors.Is(paused, storage.ErrConflict) {
			t.Fatalf("stale create of fresh.txt: err = %v, want ErrConflict", paused)
		}
		wantContents(t, plain, newerFiles)
		if rep, err := h.verify("site", all); err != nil || !rep.OK() {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
	}
}

// The newer holder left the stale writer's path alone, so the write's
// condition still holds and its bytes land under a record that describes
// other bytes. The next publication notices without rehashing the root and
// rewrites exactly that output.
func TestStaleWriteOnAnUnchangedPathIsRepairedByTheNextPublication(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		staleWriteIsRepaired(t, newRoot)
	})
}

func staleWriteIsRepaired(t *testing.T, newRoot newRootFunc) {
	{
		h := newHarness(t)
		plain, base := newRoot(t)
		counting := newCounting(plain)
		d := h.AddDest(named(base, "site", planner.Replacement), counting, pipeA)
		h.MustPublish(t1, pipeA, "site", "weatherreporter.v", eight("v0"))

		staleFiles := eight("v0")
		staleFiles["c.txt"] = "v9 c\n" // same size: only the bytes differ
		staleDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(1*time.Minute), staleFiles)
		newer := eight("v0")
		newer["a.txt"] = "newer a\n"
		newerDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(2*time.Minute), newer)

		h.Clock.Set(t2)
		// The paused write lands: c.txt is still the version both plans saw.
		h.staleRace(t, plain, d, "c.txt", staleDir, newerDir)

		rep, err := h.verify("site", all)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "damaged after the stale write", rep.Damaged, []string{"c.txt"})

		// The next publication of the same bundle repairs it, and finds it
		// by fingerprint: only c.txt is read back from the root.
		counting.Reset()
		res, err := h.Publish(t2.Add(time.Minute), pipeA, "site", newerDir)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written by the repairing publication", itemPaths(res.Written), []string{"c.txt"})
		wantStrings(t, "outputs read back", readBack(counting), []string{"c.txt"})
		wantContents(t, plain, newer)
		if rep, err := h.verify("site", all); err != nil || !rep.OK() {
			t.Fatalf("verify after the repair: %+v, %v", rep, err)
		}
		// And the one after that trusts every output again.
		counting.Reset()
		res, err = h.Publish(t2.Add(2*time.Minute), pipeA, "site", newerDir)
		if err != nil || len(res.Written) != 0 {
			t.Fatalf("republish: written %v, err %v; want nothing", itemPaths(res.Written), err)
		}
		wantStrings(t, "outputs read back", readBack(counting), nil)
	}
}

// readBack lists the outputs whose stored bytes or metadata were read
// (Stat, then Open where the backend keeps no digest), once each.
func readBack(c *countingBackend) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range append(c.Calls("Stat"), c.Calls("Open")...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// waitClosed fails the test instead of hanging when ch is not closed soon.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// pausingDeleter holds the first Delete that removes the path until
// resumed: the delete has passed the holder's lease check and is on its
// way to storage.
type pausingDeleter struct{ *pausingBackend }

func (p pausingDeleter) Delete(ctx context.Context, paths ...string) error {
	paused := false
	if slices.Contains(paths, p.path) {
		p.once.Do(func() { paused = true })
	}
	if !paused {
		return p.Backend.Delete(ctx, paths...)
	}
	close(p.reached)
	<-p.resume
	err := p.Backend.Delete(ctx, paths...)
	p.result <- err
	return err
}

// A stale delete: holder A's replacement drops c.txt and is paused inside
// that delete past its lease; holder B publishes a version with c.txt
// rewritten; then A's delete lands (deletes carry no condition). A commits
// nothing, verify reports c.txt missing, and the next publication of B's
// bundle writes it again.
func TestStaleDeleteIsRepairedByTheNextPublication(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		d := h.AddDest(named(base, "site", planner.Replacement), plain, pipeA)
		h.MustPublish(t1, pipeA, "site", "weatherreporter.v", eight("v0"))

		stale := eight("v0")
		delete(stale, "c.txt")
		staleDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(1*time.Minute), stale)
		newer := eight("v0")
		newer["c.txt"] = "newer c\n"
		newerDir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(2*time.Minute), newer)

		h.Clock.Set(t2)
		ctx := context.Background()
		pausing := newPausing(plain, "c.txt")
		la := &switchLease{}
		errA := make(chan error, 1)
		go func() {
			_, err := h.fenceHolder(ctx, pausingDeleter{pausing}, la, d, staleDir, 1)
			errA <- err
		}()
		waitClosed(t, pausing.reached, "the stale holder's paused delete of c.txt")
		la.lose()
		if _, err := h.fenceHolder(ctx, plain, &switchLease{}, d, newerDir, 4); err != nil {
			t.Fatalf("newer holder: %v", err)
		}
		close(pausing.resume)
		if err := <-pausing.result; err != nil {
			t.Fatalf("the stale delete: %v, want it to land", err)
		}
		if err := <-errA; !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the stale holder's publication: %v, want the lost lease", err)
		}

		rep, err := h.verify("site", all)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "missing after the stale delete", rep.Missing, []string{"c.txt"})
		res, err := h.Publish(t2.Add(time.Minute), pipeA, "site", newerDir)
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "written by the repairing publication", itemPaths(res.Written), []string{"c.txt"})
		wantContents(t, plain, newer)
		if rep, err := h.verify("site", all); err != nil || !rep.OK() {
			t.Fatalf("verify after the repair: %+v, %v", rep, err)
		}
	})
}
