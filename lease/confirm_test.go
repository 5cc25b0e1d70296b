package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

// wantConfirmLost checks that l.Confirm reports the lease lost to another
// holder, and that Err says so from then on.
func wantConfirmLost(t *testing.T, l Lease, when string) {
	t.Helper()
	err := l.Confirm(context.Background())
	if !errors.Is(err, ErrLost) || !errors.Is(err, ErrTakenOver) {
		t.Fatalf("%s: Confirm = %v, want ErrLost", when, err)
	}
	if err := l.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("%s: Err after Confirm = %v, want ErrLost", when, err)
	}
}

// TestConfirmSeesALockBrokenWhileItsHolderWasPaused: a holder whose lock
// object an operator removed (unlock --id), or that another holder then
// took, still finds its lease held by Err (its clock and its last renewal
// say so) until Confirm reads the lock object. Local and S3 roots.
func TestConfirmSeesALockBrokenWhileItsHolderWasPaused(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, root Root) {
		ctx := context.Background()
		paused, err := NewStorageLocker("paused", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		defer paused.Release(ctx)
		if err := paused.Confirm(ctx); err != nil {
			t.Fatalf("Confirm of a held lock: %v", err)
		}
		h, err := ReadLock(ctx, root.Store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnlockObject(ctx, root.Store, h.ID); err != nil {
			t.Fatal(err)
		}
		if err := paused.Err(); err != nil {
			t.Fatalf("Err right after the unlock: %v (Err cannot know yet)", err)
		}
		wantConfirmLost(t, paused, "after unlock")

		// Taken by another holder after the unlock.
		first, err := NewStorageLocker("first", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		h, _ = ReadLock(ctx, root.Store, time.Now())
		if _, err := UnlockObject(ctx, root.Store, h.ID); err != nil {
			t.Fatal(err)
		}
		next, err := NewStorageLocker("next", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Release(ctx)
		wantConfirmLost(t, first, "after another holder took it")
		if err := next.Confirm(ctx); err != nil {
			t.Fatalf("the new holder's Confirm: %v", err)
		}
	})
}

// TestKVConfirmSeesALeaseBrokenWhileItsHolderWasPaused is the same for the
// KV lease, and for Both: the loss of either lease is the loss of both.
func TestKVConfirmSeesALeaseBrokenWhileItsHolderWasPaused(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "file:///srv/site/", Destination: "site"}
	paused, err := env.locker("paused", time.Minute).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Release(ctx)
	if err := paused.Confirm(ctx); err != nil {
		t.Fatalf("Confirm of a held lease: %v", err)
	}
	h, err := ReadKV(ctx, env.kv, root.Key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnlockKV(ctx, env.kv, root.Key, h.ID); err != nil {
		t.Fatal(err)
	}
	if err := paused.Err(); err != nil {
		t.Fatalf("Err right after the unlock: %v (Err cannot know yet)", err)
	}
	next, err := env.locker("next", time.Minute).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if err := paused.Confirm(ctx); !errors.Is(err, ErrLost) || !errors.Is(err, ErrTakenOver) {
		t.Fatalf("Confirm after another holder took the key: %v, want ErrLost and ErrTakenOver", err)
	}
	if err := next.Confirm(ctx); err != nil {
		t.Fatalf("the new holder's Confirm: %v", err)
	}

	// Both: the lock object broken, the KV lease still held.
	forEachStore(t, func(t *testing.T, store Root) {
		store.Key = "file:///srv/both-" + t.Name() + "/"
		b, err := Both(env.locker("serve", time.Minute), NewStorageLocker("serve", time.Minute)).Acquire(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		if err := b.Confirm(ctx); err != nil {
			t.Fatalf("Confirm of both held: %v", err)
		}
		h, _ := ReadLock(ctx, store.Store, time.Now())
		if _, err := UnlockObject(ctx, store.Store, h.ID); err != nil {
			t.Fatal(err)
		}
		wantConfirmLost(t, b, "Both after its lock object was removed")
	})
}
