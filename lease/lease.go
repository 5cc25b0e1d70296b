package lease

import (
	"context"
	"errors"
	"time"

	"github.com/distributor/distributor/storage"
)

var (
	// ErrHeld: another holder has the lease. Its message calls the holder
	// live; a holder that stopped renewing is a stoppedHolderError, which
	// is ErrHeld too.
	ErrHeld = errors.New("lease held by another live holder")

	// ErrLost: the lease expired or could not be renewed; the holder must
	// stop before its next mutation.
	ErrLost = errors.New("lease lost")

	// ErrTakenOver: a conditional write proved that another holder has the
	// lease now. It comes wrapped together with ErrLost; a lease that only
	// could not be renewed (a backend that hung or went away) is ErrLost
	// without it.
	ErrTakenOver = errors.New("another holder took the lease")
)

// SafetyMargin is how long before its expiry a lease of the given TTL
// counts as lost: a quarter of the TTL. Leases renew every third of the
// TTL, so a healthy lease never gets this close; a holder whose renewals
// stalled stops writing while the lease is still surely its own, which
// leaves the margin for a write that already passed its check to finish
// before anyone else can take the root.
func SafetyMargin(ttl time.Duration) time.Duration { return ttl / 4 }

// Root identifies a destination root for locking.
type Root struct {
	// Key is the root's canonical name ("file:///abs/dir/", "s3://bucket/prefix/").
	// Several destination ids sharing one root share one Key.
	Key string

	// Store is the root itself (the direct-mode lock lives inside it).
	Store storage.Backend

	// Destination is a destination id of the root, named in the unlock
	// command that a "held" error suggests ("" in tests).
	Destination string
}

// Lease is one held lease.
type Lease interface {
	// Token is the fencing token: it increases with every new holder.
	Token() string

	// Err returns nil while the lease is held with more than its safety
	// margin left, ErrLost (wrapped) once it is not. Holders check it
	// before every mutation.
	Err() error

	// Confirm asks the lease's store whether it still names this holder
	// (its id and acquisition) and returns nil only then. Err trusts the
	// last renewal and the local clock, which cannot see a lease broken
	// by an operator (`distributor unlock`) while its holder was paused;
	// so a holder calls Confirm right before each commit, one read of
	// the store. A lease found gone or another holder's is ErrLost (with
	// ErrTakenOver), and Err reports it from then on; a store that does
	// not answer is an error that is neither (the commit waits for a
	// retry).
	Confirm(ctx context.Context) error

	// Release gives the lease up; releasing a lost lease is not an error.
	Release(ctx context.Context) error
}

// Locker hands out leases.
type Locker interface {
	// Acquire takes the root's lease, or fails with an error wrapping ErrHeld
	// when another live holder has it. The lease is renewed in the
	// background until Release or ctx ends.
	Acquire(ctx context.Context, root Root) (Lease, error)
}

// stoppedHolderError is ErrHeld for a lease whose holder stopped renewing
// it (a crashed or hung process): the lease is still held until it
// expires, but the message does not call its holder live.
type stoppedHolderError struct{ msg string }

func (e *stoppedHolderError) Error() string {
	return "lease held by a holder that stopped renewing: " + e.msg
}

func (e *stoppedHolderError) Is(target error) bool { return target == ErrHeld }

// stoppedRenewing reports whether a lease of ttl last renewed at renewed
// has missed its renewal at now: holders renew every third of the TTL, so
// half of it without one is a renewal missed by a wide margin. A ttl of 0
// (unknown) never has.
func stoppedRenewing(renewed time.Time, ttl time.Duration, now time.Time) bool {
	return ttl > 0 && now.Sub(renewed) > ttl/2
}
