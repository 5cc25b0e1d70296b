package lease

import (
	"context"
	"errors"
)

// Both holds two leases on a root as one: the first (the JetStream KV lease,
// whose revision fences serve processes) and the second (the lock object in
// the root, which every direct-mode run takes too). Every mutating run holds
// the lock object whatever else it holds, so `apply` on a host without NATS
// and a `serve` publishing the same root exclude each other.
func Both(first, second Locker) Locker { return both{first, second} }

type both struct{ first, second Locker }

func (b both) Acquire(ctx context.Context, root Root) (Lease, error) {
	// One id for both: one `distributor unlock` names them.
	if _, ok := ctx.Value(idKey{}).(string); !ok {
		ctx = withID(ctx, newID())
	}
	l1, err := b.first.Acquire(ctx, root)
	if err != nil {
		return nil, err
	}
	l2, err := b.second.Acquire(ctx, root)
	if err != nil {
		_ = l1.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return bothLease{l1, l2}, nil
}

type bothLease struct{ first, second Lease }

// Token is the first lease's token (the KV revision).
func (l bothLease) Token() string { return l.first.Token() }

// Err reports a loss of either lease.
func (l bothLease) Err() error {
	if err := l.first.Err(); err != nil {
		return err
	}
	return l.second.Err()
}

// Confirm confirms both, side by side: one round trip, not two.
func (l bothLease) Confirm(ctx context.Context) error {
	second := make(chan error, 1)
	go func() { second <- l.second.Confirm(ctx) }()
	err := l.first.Confirm(ctx)
	if err2 := <-second; err == nil {
		err = err2
	}
	return err
}

// Release gives both up, the inner one first.
func (l bothLease) Release(ctx context.Context) error {
	return errors.Join(l.second.Release(ctx), l.first.Release(ctx))
}
