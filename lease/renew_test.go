package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// renewStore wraps a root's backend: writes of the lock object after the
// first (the acquisition) go through fault.
type renewStore struct {
	storage.Backend
	mu     sync.Mutex
	writes int
	fault  func(ctx context.Context, n int, write func() (storage.Version, error)) (storage.Version, error)
}

func (s *renewStore) hookWriteNoSync(ctx context.Context, p string, data []byte, want storage.Version) (storage.Version, error) {
	write := func() (storage.Version, error) {
		return s.Backend.WriteIfVersion(ctx, p, data, want, storage.DeferSync)
	}
	s.mu.Lock()
	s.writes++
	n := s.writes
	s.mu.Unlock()
	if p != lease.LockPath || n == 1 || s.fault == nil {
		return write()
	}
	return s.fault(ctx, n, write)
}

func (s *renewStore) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.writes }

func waitWrites(t *testing.T, s *renewStore, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool { return s.count() >= n }, "%d lock writes", n)
}

// A renewal that landed although its caller saw a timeout (a server that
// resumed after the client gave up) is not a takeover: the next renewal
// finds the lock still this holder's and goes on.
func TestStorageLockRenewalThatLandedIsNotTakeover(t *testing.T) {
	t.Parallel() // waits on real renewals: overlapped with the other waiting tests
	root := localRoot(t)
	store := &renewStore{Backend: root.Store}
	store.fault = func(_ context.Context, n int, write func() (storage.Version, error)) (storage.Version, error) {
		v, err := write()
		if n == 2 && err == nil {
			return "", fmt.Errorf("S3 endpoint x did not answer within 30s (first byte): %w", storage.ErrUnavailable)
		}
		return v, err
	}
	root.Store = store
	// One failed renewal leaves ttl/12 until the lease counts as lost: 400
	// ms, which a loaded machine's scheduling does not eat up.
	const ttl = 4800 * time.Millisecond
	l, err := lease.NewStorageLocker("a", ttl).Acquire(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	waitWrites(t, store, 4) // the lost answer, a conflict (adopted), a renewal
	if err := l.Err(); err != nil {
		t.Fatalf("after a renewal whose answer was lost: Err() = %v, want the lease still held", err)
	}
	if _, err := lease.NewStorageLocker("b", ttl).Acquire(context.Background(), root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second holder: %v, want ErrHeld", err)
	}
}

// A lock another holder really overwrote is ErrTakenOver, naming it.
func TestStorageLockTakenOver(t *testing.T) {
	t.Parallel() // waits on real renewals: overlapped with the other waiting tests
	ctx := context.Background()
	root := localRoot(t)
	// The renewal that finds the intruder comes at ttl/3; the holder's own
	// clock would call the lease lost (not taken over) at 3/4 ttl if that
	// renewal were late: 2.4 s leaves a loaded machine a second.
	const ttl = 2400 * time.Millisecond
	l, err := lease.NewStorageLocker("a", ttl).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, v, err := root.Store.ReadVersion(ctx, lease.LockPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Store.WriteIfVersion(ctx, lease.LockPath, []byte(`{"holder":"intruder","host":"h2","pid":7}`), v); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return l.Err() != nil }, "the overwritten lease to be lost")
	if err := l.Err(); !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrTakenOver) || !strings.Contains(err.Error(), "was taken over by intruder (pid 7 on h2)") {
		t.Fatalf("Err() = %v, want ErrLost and ErrTakenOver naming the intruder", err)
	}
}

// A backend that hangs makes the lease lost (with the reason), never a
// takeover, and never blocks Release beyond one bounded renewal.
func TestStorageLockHungBackendIsLostNotTakenOver(t *testing.T) {
	t.Parallel()
	root := localRoot(t)
	store := &renewStore{Backend: root.Store}
	store.fault = func(ctx context.Context, _ int, _ func() (storage.Version, error)) (storage.Version, error) {
		<-ctx.Done() // hung until the renewal's own timeout
		return "", fmt.Errorf("S3 endpoint x did not answer (first byte): %w", storage.ErrUnavailable)
	}
	root.Store = store
	// The holder's own clock is the test's: it would otherwise call the
	// lease lost a moment after the hung renewal gives up, and on a loaded
	// machine sometimes before, without the reason.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const ttl = 600 * time.Millisecond
	l, err := lease.NewStorageLocker("a", ttl, lease.WithClock(clock)).Acquire(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	// The second renewal has begun: the first one's failure is recorded.
	waitWrites(t, store, 3)
	if err := l.Err(); err != nil {
		t.Fatalf("before the expiry nears: Err() = %v, want nil", err)
	}
	mu.Lock()
	now = now.Add(ttl)
	mu.Unlock()
	err = l.Err()
	if !errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrTakenOver) || !strings.Contains(err.Error(), "the last renewal failed: S3 endpoint x did not answer") {
		t.Fatalf("Err() = %v, want ErrLost (not taken over) with the renewal's failure", err)
	}
	start := time.Now()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One bounded renewal (ttl/3) may be in flight; a hung Release would
	// take forever.
	if d := time.Since(start); d > ttl {
		t.Fatalf("Release took %v with a hung backend, want at most one bounded renewal (%v) and some slack", d, ttl/3)
	}
}

// Dispatch of the contract's calls to the hooks above.

func (s *renewStore) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if storage.HasOption(opts, storage.DeferSync) {
		return s.hookWriteNoSync(ctx, p, data, want)
	}
	return s.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}
