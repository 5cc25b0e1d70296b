// Package leasetest is the contract every lease.Locker must meet, run by
// each implementation's tests (like storage/storagetest for backends):
//
//   - one holder at a time: a second Acquire fails with lease.ErrHeld until
//     the first is released, and releasing twice is not an error;
//   - a held lease is renewed past its TTL while its holder lives;
//   - a lease whose holder stops renewing (its Acquire context ended)
//     expires within about its TTL: another holder takes the root over,
//     and the stale holder's Err reports lease.ErrLost;
//   - a stale holder's Release leaves the new holder's lease alone, and
//     Confirm tells the new holder's lease held and the stale one's lost;
//   - renewal stops at Release: a released lease never comes back;
//   - every new holder's token orders after every earlier holder's.
//
// The suite runs on real time: the TTL the implementation chooses bounds
// how long it takes (a few TTLs).
package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
)

// Env is one implementation under test, with fresh state.
type Env struct {
	// NewLocker returns a locker for holder whose leases live ttl. Lockers
	// of one Env share their backing state (one bucket, one store).
	NewLocker func(holder string, ttl time.Duration) lease.Locker

	// Root is the root the suite locks; the same for every locker of the Env.
	Root lease.Root

	// TTL is the lease TTL the suite uses: short, but long enough for the
	// implementation (the KV lease needs at least 1s).
	TTL time.Duration

	// TokenLess orders tokens: TokenLess(a, b) when a is an earlier holder's.
	TokenLess func(a, b string) bool
}

// Run runs the contract against fresh Envs from newEnv.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	t.Run("OneHolderAtATime", func(t *testing.T) { t.Parallel(); oneHolderAtATime(t, newEnv(t)) })
	t.Run("RenewedPastTTL", func(t *testing.T) { t.Parallel(); renewedPastTTL(t, newEnv(t)) })
	t.Run("ContextEndStopsRenewal", func(t *testing.T) { t.Parallel(); contextEndStopsRenewal(t, newEnv(t)) })
	t.Run("ReleaseStopsRenewal", func(t *testing.T) { t.Parallel(); releaseStopsRenewal(t, newEnv(t)) })
	t.Run("TokensGrow", func(t *testing.T) { t.Parallel(); tokensGrow(t, newEnv(t)) })
}

func acquire(t *testing.T, ctx context.Context, l lease.Locker, root lease.Root) lease.Lease {
	t.Helper()
	ls, err := l.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = ls.Release(context.Background()) }) // a second Release is a no-op
	return ls
}

func wantHeld(t *testing.T, l lease.Locker, root lease.Root, when string) {
	t.Helper()
	ls, err := l.Acquire(context.Background(), root)
	if err == nil {
		_ = ls.Release(context.Background())
		t.Fatalf("%s: Acquire succeeded, want lease.ErrHeld", when)
	}
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("%s: Acquire = %v, want lease.ErrHeld", when, err)
	}
}

// acquireWithin retries Acquire while the root is held, for up to limit.
func acquireWithin(t *testing.T, l lease.Locker, root lease.Root, limit time.Duration, when string) lease.Lease {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ls, err := l.Acquire(context.Background(), root)
		if err == nil {
			t.Cleanup(func() { _ = ls.Release(context.Background()) })
			return ls
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("%s: Acquire = %v within %s, want the lease", when, err, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func oneHolderAtATime(t *testing.T, env Env) {
	ctx := context.Background()
	a := acquire(t, ctx, env.NewLocker("a", env.TTL), env.Root)
	wantHeld(t, env.NewLocker("b", env.TTL), env.Root, "while a holds the root")
	if err := a.Err(); err != nil {
		t.Fatalf("a held lease: Err() = %v, want nil", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("second Release: %v, want nil", err)
	}
	b := acquire(t, ctx, env.NewLocker("b", env.TTL), env.Root)
	if err := b.Err(); err != nil {
		t.Fatalf("b after a released: Err() = %v, want nil", err)
	}
	wantHeld(t, env.NewLocker("a", env.TTL), env.Root, "while b holds the root")
}

// holdTTL is the TTL of a lease the suite needs to stay held. A holder
// counts its lease lost when a renewal is a quarter of the TTL late, and at
// the 1 s KV minimum that is 250 ms: less than a loaded two-core machine
// can stall a goroutine. Twice the TTL keeps the test about renewal, not
// about the machine's load.
func holdTTL(env Env) time.Duration { return 2 * env.TTL }

func renewedPastTTL(t *testing.T, env Env) {
	ttl := holdTTL(env)
	a := acquire(t, context.Background(), env.NewLocker("a", ttl), env.Root)

	// Real time must pass (the server's TTL is on its own clock):
	// renewals, not the first write, keep the lease past it.
	time.Sleep(ttl + ttl/2)
	if err := a.Err(); err != nil {
		t.Fatalf("after 1.5 TTLs of renewals: Err() = %v, want nil", err)
	}
	wantHeld(t, env.NewLocker("b", env.TTL), env.Root, "after 1.5 TTLs of renewals")
}

func contextEndStopsRenewal(t *testing.T, env Env) {
	ctx, cancel := context.WithCancel(context.Background())
	a := acquire(t, ctx, env.NewLocker("a", env.TTL), env.Root)
	cancel()

	// Renewal has stopped: the lease lapses within its TTL (and the
	// backend's expiry granularity), and another holder takes the root.
	b := acquireWithin(t, env.NewLocker("b", env.TTL), env.Root, 4*env.TTL, "after a's context ended")
	if err := a.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a after b took over: Err() = %v, want lease.ErrLost", err)
	}
	if !env.TokenLess(a.Token(), b.Token()) {
		t.Fatalf("takeover token %q does not order after %q", b.Token(), a.Token())
	}

	// The stale holder's Release is harmless: b keeps the root.
	if err := a.Release(context.Background()); err != nil {
		t.Fatalf("stale Release: %v, want nil", err)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("b after a's stale Release: Err() = %v, want nil", err)
	}
	if err := b.Confirm(context.Background()); err != nil {
		t.Fatalf("b after a's stale Release: Confirm() = %v, want nil", err)
	}
	if err := a.Confirm(context.Background()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a after b took over: Confirm() = %v, want lease.ErrLost", err)
	}
	wantHeld(t, env.NewLocker("c", env.TTL), env.Root, "after a's stale Release")
}

func releaseStopsRenewal(t *testing.T, env Env) {
	ctx := context.Background()
	a := acquire(t, ctx, env.NewLocker("a", env.TTL), env.Root)
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// Nothing of a's renews the root after Release: b holds it through
	// more than a TTL, and after b's release the root is free again.
	b := acquire(t, ctx, env.NewLocker("b", holdTTL(env)), env.Root)

	// Real time must pass: a renewal of a's would land within a's TTL.
	time.Sleep(env.TTL + env.TTL/2)
	if err := b.Err(); err != nil {
		t.Fatalf("b: Err() = %v, want nil", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("b Release: %v", err)
	}
	c := acquire(t, ctx, env.NewLocker("c", env.TTL), env.Root)
	if err := c.Err(); err != nil {
		t.Fatalf("c: Err() = %v, want nil", err)
	}
}

func tokensGrow(t *testing.T, env Env) {
	ctx := context.Background()
	var prev string
	for i, holder := range []string{"a", "b", "c"} {
		ls := acquire(t, ctx, env.NewLocker(holder, env.TTL), env.Root)
		tok := ls.Token()
		if i > 0 && !env.TokenLess(prev, tok) {
			t.Fatalf("holder %s: token %q does not order after the previous holder's %q", holder, tok, prev)
		}
		prev = tok
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}
