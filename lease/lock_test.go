package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

func localRoot(t *testing.T) lease.Root {
	t.Helper()
	dir := t.TempDir()
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return lease.Root{Key: "file://" + dir + "/", Store: b}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestStorageLockExcludesSecondHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	a := lease.NewStorageLocker("a", time.Minute)
	b := lease.NewStorageLocker("b", time.Minute)
	la, err := a.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second Acquire: got %v, want ErrHeld", err)
	}
	if err := la.Err(); err != nil {
		t.Fatalf("held lease reports %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := root.Store.ReadVersion(ctx, lease.LockPath); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	_ = lb.Release(ctx)
}

func TestStorageLockConcurrentAcquireHasOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lease.NewStorageLocker(string(rune('a'+i)), time.Minute)
			if _, err := l.Acquire(ctx, root); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, lease.ErrHeld) {
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d holders acquired the lock, want exactly 1", wins.Load())
	}
}

func TestStorageLockExpiredIsTakenOverAndStaleHolderLosesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	clk := &clock{t: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)}
	alive := func(int) bool { return true }
	// Renewal every ttl/3 = 1h: it never fires during the test, like a stalled holder.
	a := lease.NewStorageLocker("a", 3*time.Hour, lease.WithClock(clk.now), lease.WithProcess("host-a", 100, alive))
	b := lease.NewStorageLocker("b", 3*time.Hour, lease.WithClock(clk.now), lease.WithProcess("host-b", 200, alive))
	la, err := a.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("before expiry: got %v, want ErrHeld", err)
	}
	// The holder gives up a safety margin (a quarter of the TTL) before
	// anyone else can take the lock: the window for its last write.
	clk.add(2*time.Hour + 15*time.Minute)
	if err := la.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale holder Err() = %v inside the safety margin, want ErrLost", err)
	}
	if _, err := b.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("inside the safety margin: got %v, want ErrHeld (the lock has not expired)", err)
	}
	clk.add(45*time.Minute + time.Second)
	lb, err := b.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("takeover of expired lock: %v", err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token did not increase: %s then %s", la.Token(), lb.Token())
	}
	// The stale holder's release must not remove the new holder's lock.
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	data, v, err := root.Store.ReadVersion(ctx, lease.LockPath)
	if err != nil || v == "" {
		t.Fatalf("new holder's lock gone after stale release: %v", err)
	}
	var rec struct{ Holder string }
	_ = json.Unmarshal(data, &rec)
	if rec.Holder != "b" {
		t.Fatalf("lock holder = %q, want b", rec.Holder)
	}
	_ = lb.Release(ctx)
}

func TestStorageLockOfDeadProcessOnSameHostIsTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	dead := func(pid int) bool { return pid != 100 }
	a := lease.NewStorageLocker("a", time.Hour, lease.WithProcess("host", 100, dead))
	if _, err := a.Acquire(ctx, root); err != nil {
		t.Fatal(err)
	}
	// a "crashes" (never releases); b on the same host sees pid 100 is gone.
	b := lease.NewStorageLocker("b", time.Hour, lease.WithProcess("host", 200, dead))
	lb, err := b.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("takeover from dead pid: %v", err)
	}
	_ = lb.Release(ctx)
	// On another host the pid cannot be checked: the lock holds until expiry.
	if _, err := a.Acquire(ctx, root); err != nil {
		t.Fatal(err)
	}
	c := lease.NewStorageLocker("c", time.Hour, lease.WithProcess("other-host", 300, dead))
	if _, err := c.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("other host: got %v, want ErrHeld", err)
	}
}

func TestStorageLockRenewsBeforeExpiry(t *testing.T) {
	t.Parallel() // waits on real renewals: overlapped with the other waiting tests
	ctx := context.Background()
	root := localRoot(t)
	store := &renewStore{Backend: root.Store}
	root.Store = store
	// Renewals come every ttl/3 and a holder counts its lease lost 3/4 of a
	// TTL after the last one: 1.5 s leaves a loaded machine (-race, CI
	// neighbours) over 600 ms of slack per renewal.
	const ttl = 1500 * time.Millisecond
	l := lease.NewStorageLocker("a", ttl)
	la, err := l.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// The lock write, then four renewals: more than a TTL has passed.
	waitWrites(t, store, 5)
	if err := la.Err(); err != nil {
		t.Fatalf("renewed lease reports %v after 4 renewals", err)
	}
	other := lease.NewStorageLocker("b", ttl, lease.WithProcess("elsewhere", 1, func(int) bool { return true }))
	if _, err := other.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("got %v, want ErrHeld while renewed", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, v, _ := root.Store.ReadVersion(ctx, lease.LockPath); v != "" {
		t.Fatal("lock object still there after Release")
	}
}

var _ storage.Backend
