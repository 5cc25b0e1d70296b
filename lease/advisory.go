package lease

import (
	"context"
	"errors"
	"time"
)

// advisoryReleaseTimeout bounds the release of an advisory lease whose
// server may be gone.
const advisoryReleaseTimeout = 2 * time.Second

// WithAdvisory holds two leases on a root like Both, but only the second
// (the lock object in the root) fences the run. The first (the KV lease of
// a direct-mode run that found NATS) coordinates with `serve`: losing it
// because its server went away or stopped answering does not stop the run,
// which the lock object still fences; losing it to another holder
// (ErrTakenOver) does.
func WithAdvisory(advisory, fence Locker) Locker { return withAdvisory{advisory, fence} }

type withAdvisory struct{ advisory, fence Locker }

func (w withAdvisory) Acquire(ctx context.Context, root Root) (Lease, error) {
	l, err := Both(w.advisory, w.fence).Acquire(ctx, root)
	if err != nil {
		return nil, err
	}
	b := l.(bothLease)
	return advisoryLease{advisory: b.first, fence: b.second}, nil
}

type advisoryLease struct{ advisory, fence Lease }

// Token is the advisory lease's token, as with Both.
func (l advisoryLease) Token() string { return l.advisory.Token() }

// Err reports a loss of the fence, or the advisory lease taken over.
func (l advisoryLease) Err() error {
	if err := l.fence.Err(); err != nil {
		return err
	}
	if err := l.advisory.Err(); errors.Is(err, ErrTakenOver) {
		return err
	}
	return nil
}

// Confirm confirms the fence. The advisory lease is not asked: a holder
// that takes its key over must take the fence too, which Confirm sees.
func (l advisoryLease) Confirm(ctx context.Context) error {
	if err := l.fence.Confirm(ctx); err != nil {
		return err
	}
	return l.Err()
}

// Release gives the fence up, then tries the advisory lease for a short time.
func (l advisoryLease) Release(ctx context.Context) error {
	err := l.fence.Release(ctx)
	actx, cancel := context.WithTimeout(ctx, advisoryReleaseTimeout)
	defer cancel()

	// Best effort: a key that cannot be deleted expires with its TTL.
	_ = l.advisory.Release(actx)
	return err
}
