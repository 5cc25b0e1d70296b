package service_test

// A root's lease handed from one publication to the next queued in the
// same process (Runner.HandOver): only while it is held, within its
// bounds, renewed for whichever publication uses it, and never shared
// with another process.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// handOverRoot is one local root with n destinations d<i> (pipelines p<i>,
// additive), each with a bundle writing d<i>/report.md.
type handOverRoot struct {
	t     *testing.T
	h     *harness
	root  storage.Backend
	dests []config.Destination
	dirs  []string
	want  map[string]string
}

func newHandOverRoot(t *testing.T, n int, locker lease.Locker, ho service.HandOver) *handOverRoot {
	t.Helper()
	h := newHarness(t)
	h.Service.Locker = locker
	h.Service.LeaseWait = 30 * time.Second
	h.Service.HandOver = ho
	root, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &handOverRoot{t: t, h: h, root: root, want: map[string]string{}}
	base := config.Destination{Backend: "local", Path: root.String()}
	for i := range n {
		pipe, dest := fmt.Sprintf("p%d", i), fmt.Sprintf("d%d", i)
		c.dests = append(c.dests, h.AddDest(named(base, dest, planner.Additive), root, pipe))
		files := map[string]string{dest + "/report.md": fmt.Sprintf("# %d\n", i)}
		c.want[dest+"/report.md"] = files[dest+"/report.md"]
		dir, _ := makeBundleAt(t, pipe+".src", t0, files)
		c.dirs = append(c.dirs, dir)
	}
	return c
}

func (c *handOverRoot) key() string { return c.dests[0].RootKey() }

// publication is the publication of bundle i to d<i>.
func (c *handOverRoot) publication(ctx context.Context, i int) (engine.Publication, error) {
	req := service.Request{PipelineID: fmt.Sprintf("p%d", i), Bundle: c.dirs[i], BundleEventID: fmt.Sprintf("ev-%d", i)}
	b, err := c.h.Service.OpenBundle(ctx, req)
	if err != nil {
		return engine.Publication{}, err
	}
	pub, err := service.PublicationTo(ctx, c.dests[i], req.PipelineID, b)
	pub.BundleEventID = req.BundleEventID
	return pub, err
}

// publishWith runs publication i on runner r under the root's lease;
// before it, hook runs with the lease (nil: none). It returns the token.
func (c *handOverRoot) publishWith(ctx context.Context, r *service.Service, i int, hook func(lease.Lease) error) (string, error) {
	pub, err := c.publication(ctx, i)
	if err != nil {
		return "", err
	}
	var token string
	err = r.WithLease(ctx, c.dests[i], func(root storage.Backend, l lease.Lease) error {
		token = l.Token()
		if hook != nil {
			if err := hook(l); err != nil {
				return err
			}
		}
		_, err := r.Engine.Publish(ctx, root, l, pub)
		return err
	})
	return token, err
}

// queue starts publications from..to-1 (the harness's runner) once the
// first holds the root, and waits until all of them wait for its turn.
func (c *handOverRoot) queue(from, to int, tokens []string, errs []error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Go(func() { tokens[i], errs[i] = c.publishWith(context.Background(), c.h.Service, i, nil) })
		// One at a time: the queue's order is the index's.
		testenv.Eventually(c.t, 10*time.Second, func() bool { return c.h.Service.Queued(c.key()) == i+1 }, "publication %d to queue", i)
	}
	return &wg
}

// runQueued holds the root with publication 0 (hook runs before it, with
// its lease and context), queues 1..n-1 behind it, lets 0 go on and
// returns every publication's token and error.
func (c *handOverRoot) runQueued(ctx context.Context, hook func(context.Context, lease.Lease) error) ([]string, []error) {
	n := len(c.dests)
	tokens, errs := make([]string, n), make([]error, n)
	holding, goOn := make(chan struct{}), make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(first)
		tokens[0], errs[0] = c.publishWith(ctx, c.h.Service, 0, func(l lease.Lease) error {
			close(holding)
			<-goOn
			if hook != nil {
				return hook(ctx, l)
			}
			return nil
		})
	}()
	<-holding
	wg := c.queue(1, n, tokens, errs)
	close(goOn)
	<-first
	wg.Wait()
	return tokens, errs
}

func (c *handOverRoot) wantAllPublished(errs []error) {
	c.t.Helper()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("publication %d: %v", i, err)
		}
	}
	wantContents(c.t, c.root, c.want)
	assertDescribesStorage(c.t, c.root)
}

// successful counts the lease acquisitions that succeeded.
type successful struct {
	lease.Locker
	n atomic.Int32
}

func (s *successful) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	l, err := s.Locker.Acquire(ctx, root)
	if err == nil {
		s.n.Add(1)
	}
	return l, err
}

// uses counts how many publications each token served.
func uses(tokens []string) map[string]int {
	m := map[string]int{}
	for _, tok := range tokens {
		m[tok]++
	}
	return m
}

// TestQueuedPublicationsShareTheRootsLease: 6 publications of one process
// queued for one root take its lease once: each hands it to the next, all
// report the same token, and all land.
func TestQueuedPublicationsShareTheRootsLease(t *testing.T) {
	t.Parallel()
	locker := &countingLocker{Locker: lease.NewStorageLocker("engine-test", time.Minute)}
	c := newHandOverRoot(t, 6, locker, service.HandOver{Max: 16, For: time.Minute})
	tokens, errs := c.runQueued(context.Background(), nil)
	c.wantAllPublished(errs)
	if calls, held := locker.calls.Load(), locker.held.Load(); calls != 1 || held != 0 {
		t.Fatalf("%d lease requests, %d found it held; want 1 and 0 (handed over 5 times)", calls, held)
	}
	if u := uses(tokens); len(u) != 1 {
		t.Fatalf("tokens %v: want one, shared by all 6", tokens)
	}
	if err := assertNoLock(t, c.root); err != nil {
		t.Fatal(err)
	}
}

// assertNoLock: the last publication released the lease (no lock object).
func assertNoLock(t *testing.T, root storage.Backend) error {
	t.Helper()
	if _, err := root.Stat(context.Background(), lease.LockPath); !errors.Is(err, storage.ErrNotExist) {
		return fmt.Errorf("lock object after the last publication: %v, want none", err)
	}
	return nil
}

// TestHandOverBounds: a lease serves at most HandOver.Max publications in
// a row, and is not handed on once held HandOver.For; zero hands nothing.
func TestHandOverBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ho       service.HandOver
		acquired int32
		most     int
	}{
		{"Max=3", service.HandOver{Max: 3, For: time.Minute}, 3, 3}, // 7 = 3 + 3 + 1
		{"For=1ns", service.HandOver{Max: 16, For: time.Nanosecond}, 7, 1},
		{"zero", service.HandOver{}, 7, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			locker := &successful{Locker: lease.NewStorageLocker("engine-test", time.Minute)}
			c := newHandOverRoot(t, 7, locker, tc.ho)
			tokens, errs := c.runQueued(context.Background(), nil)
			c.wantAllPublished(errs)
			if got := locker.n.Load(); got != tc.acquired {
				t.Fatalf("%d acquisitions, want %d", got, tc.acquired)
			}
			u := uses(tokens)
			for tok, n := range u {
				if n > tc.most {
					t.Fatalf("token %s served %d publications, want at most %d", tok, n, tc.most)
				}
			}
			if len(u) != int(tc.acquired) {
				t.Fatalf("%d tokens for %d acquisitions: %v", len(u), tc.acquired, tokens)
			}
		})
	}
}

// TestALostLeaseIsNotHandedOver: the lease runs out after the first
// publication committed and before its turn ends: the next publication
// acquires the root afresh, under a new and larger token.
func TestALostLeaseIsNotHandedOver(t *testing.T) {
	t.Parallel()
	lockClock := &clock{}
	lockClock.Set(time.Now())
	locker := &successful{Locker: lease.NewStorageLocker("engine-test", time.Minute, lease.WithClock(lockClock.Now))}
	c := newHandOverRoot(t, 2, locker, service.HandOver{Max: 16, For: time.Hour})
	n := 2
	tokens, errs := make([]string, n), make([]error, n)
	holding, goOn, first := make(chan struct{}), make(chan struct{}), make(chan struct{})
	pub, err := c.publication(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(first)
		errs[0] = c.h.Service.WithLease(context.Background(), c.dests[0], func(root storage.Backend, l lease.Lease) error {
			tokens[0] = l.Token()
			close(holding)
			<-goOn
			if _, err := c.h.Service.Engine.Publish(context.Background(), root, l, pub); err != nil {
				return err
			}
			// Past the expiry: the lease is lost (Err), as after a pause.
			lockClock.Set(lockClock.Now().Add(2 * time.Minute))
			if l.Err() == nil {
				return errors.New("lease not lost after its expiry")
			}
			return nil
		})
	}()
	<-holding
	wg := c.queue(1, n, tokens, errs)
	close(goOn)
	<-first
	wg.Wait()
	c.wantAllPublished(errs)
	if got := locker.n.Load(); got != 2 {
		t.Fatalf("%d acquisitions, want 2 (the lost lease not handed over)", got)
	}
	if !lockTokenLess(t, tokens[0], tokens[1]) {
		t.Fatalf("token %s after the lost %s: want a larger one", tokens[1], tokens[0])
	}
}

// lockTokenLess orders lock-object tokens ("generation.acquired-nanos").
func lockTokenLess(t *testing.T, a, b string) bool {
	t.Helper()
	var ga, na, gb, nb int64
	if _, err := fmt.Sscanf(a, "%d.%d", &ga, &na); err != nil {
		t.Fatalf("token %q: %v", a, err)
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &gb, &nb); err != nil {
		t.Fatalf("token %q: %v", b, err)
	}
	return na < nb || (na == nb && ga < gb)
}

// lockExpiry reads the lock object's expiry.
func lockExpiry(root storage.Backend) (time.Time, error) {
	data, _, err := root.ReadVersion(context.Background(), lease.LockPath)
	if err != nil {
		return time.Time{}, err
	}
	var rec struct {
		Expires time.Time `json:"expires"`
	}
	err = json.Unmarshal(data, &rec)
	return rec.Expires, err
}

// TestACancelledFirstEventDoesNotEndTheHandedOverLease: the first
// publication's context ends right after its turn (as Service.Publish's
// does): the lease it handed on keeps being renewed for the second.
func TestACancelledFirstEventDoesNotEndTheHandedOverLease(t *testing.T) {
	t.Parallel()
	const ttl = 1500 * time.Millisecond // renewed every 500 ms
	locker := &successful{Locker: lease.NewStorageLocker("engine-test", ttl)}
	c := newHandOverRoot(t, 2, locker, service.HandOver{Max: 16, For: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	tokens, errs := make([]string, 2), make([]error, 2)
	holding, goOn, first, cancelled := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(first)
		tokens[0], errs[0] = c.publishWith(ctx, c.h.Service, 0, func(lease.Lease) error { close(holding); <-goOn; return nil })
		cancel()
		close(cancelled)
	}()
	<-holding
	var wg sync.WaitGroup
	wg.Go(func() {
		tokens[1], errs[1] = c.publishWith(context.Background(), c.h.Service, 1, func(l lease.Lease) error {
			<-cancelled
			// A renewal after the first event's context ended.
			before, err := lockExpiry(c.root)
			if err != nil {
				return err
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				e, err := lockExpiry(c.root)
				return err == nil && e.After(before)
			}, "a renewal of the handed-over lease")
			return l.Err()
		})
	})
	testenv.Eventually(t, 10*time.Second, func() bool { return c.h.Service.Queued(c.key()) == 2 }, "the second publication to queue")
	close(goOn)
	<-first
	wg.Wait()
	c.wantAllPublished(errs)
	if got := locker.n.Load(); got != 1 || tokens[0] != tokens[1] {
		t.Fatalf("%d acquisitions, tokens %v: want 1, handed over", got, tokens)
	}
}

// TestAnEventCancelledWhileHoldingDoesNotHandOver: a publication whose
// context ends while it holds the lease stops its renewal, as without
// hand-overs: the lease is released, and the next one acquires afresh.
func TestAnEventCancelledWhileHoldingDoesNotHandOver(t *testing.T) {
	t.Parallel()
	locker := &successful{Locker: lease.NewStorageLocker("engine-test", time.Minute)}
	c := newHandOverRoot(t, 2, locker, service.HandOver{Max: 16, For: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	tokens, errs := c.runQueued(ctx, func(context.Context, lease.Lease) error { cancel(); return nil })
	if !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("cancelled publication: %v, want context.Canceled", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("second publication: %v", errs[1])
	}
	delete(c.want, "d0/report.md")
	wantContents(t, c.root, c.want)
	if got := locker.n.Load(); got != 2 || tokens[0] == tokens[1] {
		t.Fatalf("%d acquisitions, tokens %v: want 2, not handed over", got, tokens)
	}
}

// TestTwoProcessesOnOneRootWithHandOvers: two Runners (two serve
// processes: their own turns, KV lockers of their own) publish 6 queued
// events each into one root. Their publications never overlap, each
// token serves one process only and at most HandOver.Max publications,
// tokens grow whenever the holder changes, and everything lands.
func TestTwoProcessesOnOneRootWithHandOvers(t *testing.T) {
	t.Parallel()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(context.Background(), js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ho := service.HandOver{Max: 2, For: time.Minute}
	c := newHandOverRoot(t, 12, lease.NewKV(js, st.Leases, "proc-a", 2*time.Second), ho)
	a := c.h.Service
	b := &service.Service{Engine: a.Engine, Config: a.Config, Stores: a.Stores, LeaseWait: a.LeaseWait, HandOver: ho,
		Locker: lease.NewKV(js, st.Leases, "proc-b", 2*time.Second)}
	var (
		mu      sync.Mutex
		order   []string // tokens in the order publications ran
		owner   = map[string]*service.Service{}
		inside  atomic.Int32
		overlap atomic.Bool
	)
	errs := make([]error, 12)
	var wg sync.WaitGroup
	for i := range 12 {
		r := a
		if i%2 == 1 {
			r = b
		}
		wg.Go(func() {
			_, errs[i] = c.publishWith(context.Background(), r, i, func(l lease.Lease) error {
				if inside.Add(1) != 1 {
					overlap.Store(true)
				}
				defer inside.Add(-1)
				mu.Lock()
				defer mu.Unlock()
				if o := owner[l.Token()]; o != nil && o != r {
					return fmt.Errorf("token %s used by both processes", l.Token())
				}
				owner[l.Token()] = r
				order = append(order, l.Token())
				return nil
			})
		})
	}
	wg.Wait()
	c.wantAllPublished(errs)
	if overlap.Load() {
		t.Fatal("two publications held the root at once")
	}
	wantGrowingTokens(t, order, ho.Max)
}

// wantGrowingTokens: in run order, a token repeats only in a run of at
// most most publications, and the next token is a larger revision.
func wantGrowingTokens(t *testing.T, order []string, most int) {
	t.Helper()
	run := 0
	for i, tok := range order {
		if i > 0 && tok == order[i-1] {
			if run++; run > most {
				t.Fatalf("token %s served more than %d publications in a row: %v", tok, most, order)
			}
			continue
		}
		run = 1
		var prev, cur uint64
		if i > 0 {
			_, _ = fmt.Sscan(order[i-1], &prev)
		}
		if _, err := fmt.Sscan(tok, &cur); err != nil || cur <= prev {
			t.Fatalf("token %s after %d: want a larger revision (%v)", tok, prev, order)
		}
	}
}

// TestAWaiterThatGaveUpLeavesTheLeaseFree: a publication that stops
// waiting for the root's turn (its lease wait ran out) takes nothing over;
// when the holder ends, with nobody left waiting, the lease is released.
func TestAWaiterThatGaveUpLeavesTheLeaseFree(t *testing.T) {
	t.Parallel()
	locker := &successful{Locker: lease.NewStorageLocker("engine-test", time.Minute)}
	c := newHandOverRoot(t, 2, locker, service.HandOver{Max: 16, For: time.Hour})
	c.h.Service.LeaseWait = 200 * time.Millisecond
	holding, goOn, first := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var firstErr error
	go func() {
		defer close(first)
		_, firstErr = c.publishWith(context.Background(), c.h.Service, 0, func(lease.Lease) error { close(holding); <-goOn; return nil })
	}()
	<-holding
	_, err := c.publishWith(context.Background(), c.h.Service, 1, nil)
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("publication that gave up waiting: %v, want lease.ErrHeld", err)
	}
	close(goOn)
	<-first
	if firstErr != nil {
		t.Fatalf("holder: %v", firstErr)
	}
	if q := c.h.Service.Queued(c.key()); q != 0 {
		t.Fatalf("%d publications still in the root's line, want 0", q)
	}
	if err := assertNoLock(t, c.root); err != nil {
		t.Fatal(err)
	}
	if got := locker.n.Load(); got != 1 {
		t.Fatalf("%d acquisitions, want 1", got)
	}
}
