package engine

import (
	"context"
	"sync"
	"time"

	"github.com/distributor/distributor/lease"
)

// rootTurns makes the publications of one process into one root take
// turns in arrival order, in process, before they ask for the root's
// lease: the second of two events for a root waits for the first to end
// instead of polling a held lease (pauses of 50–250 ms, a failed request
// each), so more workers do not mean more lease races. A turn that ends
// while another waits may leave its lease to it (Runner.HandOver). The
// zero value is ready.
type rootTurns struct {
	mu sync.Mutex
	q  map[string]*turn
}

// turn is one root's token (a channel of one: its waiters queue in order),
// how many hold or wait for it, and the lease its last holder left for
// the next.
type turn struct {
	token chan struct{}
	users int
	left  *holding
}

// seat is a turn taken: done gives it up.
type seat struct {
	t   *rootTurns
	key string
	tu  *turn
}

// take waits until key's turn is free, up to deadline, and returns it; ok
// is false when the deadline or ctx ended the wait first.
func (t *rootTurns) take(ctx context.Context, key string, deadline time.Time) (s *seat, ok bool) {
	t.mu.Lock()
	if t.q == nil {
		t.q = map[string]*turn{}
	}
	tu := t.q[key]
	if tu == nil {
		tu = &turn{token: make(chan struct{}, 1)}
		t.q[key] = tu
	}
	tu.users++
	t.mu.Unlock()
	s = &seat{t: t, key: key, tu: tu}
	select { // free at once: no timer
	case tu.token <- struct{}{}:
		return s, true
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		s.leave(ctx)
		return nil, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case tu.token <- struct{}{}:
		return s, true
	case <-timer.C:
	case <-ctx.Done():
	}
	s.leave(ctx)
	return nil, false
}

// done gives the turn to the next waiter.
func (s *seat) done(ctx context.Context) {
	<-s.tu.token
	s.leave(ctx)
}

// leave counts one user less. The last one out releases a lease left for
// a waiter that gave up instead of taking its turn.
func (s *seat) leave(ctx context.Context) {
	s.t.mu.Lock()
	var orphan *holding
	if s.tu.users--; s.tu.users == 0 {
		delete(s.t.q, s.key)
		orphan, s.tu.left = s.tu.left, nil
	}
	s.t.mu.Unlock()
	if orphan != nil {
		_ = orphan.release(context.WithoutCancel(ctx)) // it expires on its own otherwise
	}
}

// leaveLease leaves h to the next holder of the turn, if one waits.
func (s *seat) leaveLease(h *holding) bool {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if s.tu.users < 2 {
		return false
	}
	s.tu.left = h
	return true
}

// pick takes the lease the last holder left, if any.
func (s *seat) pick() *holding {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	h := s.tu.left
	s.tu.left = nil
	return h
}

// holding is a root's lease as the publications that share it see it. Its
// renewal runs on a context of its own (ctx below), cancelled by whichever
// publication uses it when that publication's context ends (bind), so a
// lease handed on does not die with the context of the event that took it.
type holding struct {
	l      lease.Lease
	cancel context.CancelFunc // ends the renewal
	unbind func() bool        // false: the current user's context ended
	since  time.Time          // when it was acquired
	uses   int                // publications it served
}

// bind ties the renewal to ctx, the context of the publication about to
// use the lease, until unbind.
func (h *holding) bind(ctx context.Context) {
	h.unbind = context.AfterFunc(ctx, h.cancel)
	h.uses++
}

// release gives the lease up and ends its renewal.
func (h *holding) release(ctx context.Context) error {
	err := h.l.Release(ctx)
	h.cancel()
	return err
}
