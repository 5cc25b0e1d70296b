package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A lock object whose holder stopped renewing it (half its TTL without a
// renewal) is refused as held, with a message that says so, when it
// expires and the unlock command; a holder that renews is called live.
func TestHeldLockOfAHolderThatStoppedRenewing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, root Root) {
		h := abandon(t, root)
		_, err := NewStorageLocker("me", time.Minute).Acquire(context.Background(), root)
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "lease held by another live holder: ") {
			t.Fatalf("Acquire right after the holder's last renewal: %v, want a live holder", err)
		}

		later := func() time.Time { return time.Now().Add(MaxTTL/2 + time.Second) }
		_, err = NewStorageLocker("me", time.Minute, WithClock(later)).Acquire(context.Background(), root)
		want := "lease held by a holder that stopped renewing: " + root.Store.String() + " is locked by direct dev on otherhost pid 4242 (pid 4242 on otherhost), which stopped renewing at " +
			h.Acquired.Format(time.RFC3339) + "; the lock expires at " + h.Expires.Format(time.RFC3339) +
			", or break it now with `distributor unlock --destination site --id " + h.ID + "`"
		if !errors.Is(err, ErrHeld) || err == nil || err.Error() != want {
			t.Fatalf("Acquire after half the TTL without a renewal:\n got %v\nwant %s", err, want)
		}
	})
}

// The same for the KV lease: its last renewal is the key's last revision.
func TestHeldKVLeaseOfAHolderThatStoppedRenewing(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	root := Root{Key: "file:///srv/reports/", Destination: "site"}
	ctx, cancel := context.WithCancel(context.Background())
	held, err := env.locker("serve on host-1", 30*time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // renewals stop; the key stays until its TTL
	_ = held

	_, err = env.locker("me", 30*time.Second).Acquire(context.Background(), root)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "lease held by another live holder: file:///srv/reports/ is held by serve on host-1 since ") {
		t.Fatalf("Acquire right after the holder's renewal: %v, want a live holder", err)
	}
	later := func() time.Time { return time.Now().Add(16 * time.Second) }
	_, err = env.locker("me", 30*time.Second, WithKVClock(later)).Acquire(context.Background(), root)
	if !errors.Is(err, ErrHeld) || err == nil || !strings.HasPrefix(err.Error(), "lease held by a holder that stopped renewing: file:///srv/reports/ is held by serve on host-1, which stopped renewing at ") ||
		!strings.Contains(err.Error(), "; the lease expires at ") || !strings.Contains(err.Error(), ", or break it now with `distributor unlock --destination site --id ") {
		t.Fatalf("Acquire after half the TTL without a renewal: %v", err)
	}
}
