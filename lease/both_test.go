package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
)

// A holder of the combined lease excludes a direct-mode run that only takes
// the lock object, and the other way round.
func TestBothExcludesLockOnlyHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	other := lease.NewStorageLocker("other", time.Minute, lease.WithProcess("elsewhere", 1, func(int) bool { return true }))
	// The first lease stands in for the KV lease: it lives elsewhere (a
	// lock object in another folder), as the KV bucket is not in the root.
	kvRoot := localRoot(t)
	combined := lease.Both(fixedRoot{lease.NewStorageLocker("kv-stand-in", time.Minute), kvRoot}, lease.NewStorageLocker("serve", time.Minute))

	l, err := combined.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("lock-only run while the combined lease is held: %v, want ErrHeld", err)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lo, err := other.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if _, err := combined.Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("combined while a lock-only run holds the root: %v, want ErrHeld", err)
	}
	// The failed combined Acquire released its first lease: it can be taken again.
	if _, err := (fixedRoot{lease.NewStorageLocker("x", time.Minute), kvRoot}).Acquire(ctx, root); err != nil {
		t.Fatalf("first lease leaked after a failed combined Acquire: %v", err)
	}
	_ = lo.Release(ctx)
}

// fixedRoot acquires on a fixed root whatever root it is asked for.
type fixedRoot struct {
	l    lease.Locker
	root lease.Root
}

func (f fixedRoot) Acquire(ctx context.Context, _ lease.Root) (lease.Lease, error) {
	return f.l.Acquire(ctx, f.root)
}
