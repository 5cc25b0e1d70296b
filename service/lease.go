package service

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// HandOver bounds how long one lease serves the publications queued in
// one process for its root. A lease is handed on only while it is held
// (Err is nil), to a publication of the same Service that waits for the
// root's turn, and only after the one before returned: the holder does
// not change, so neither does the token. The bounds make the process
// release and acquire the lease again from time to time, which is where
// another process waiting for the root gets its chance and the token
// grows.
type HandOver struct {
	// Max is how many publications in a row one lease may serve (2 or
	// more to hand over at all).
	Max int

	// For: a lease held this long is not handed on (0: no time bound).
	For time.Duration
}

// DefaultHandOver is serve's: a root's lease serves at most 16 queued
// publications of one process, and is not handed on after a second.
var DefaultHandOver = HandOver{Max: 16, For: time.Second}

// WithLease opens d's root, holds the root's lease while fn runs, and
// releases it afterwards.
func (s *Service) WithLease(ctx context.Context, d config.Destination, fn func(root storage.Backend, l lease.Lease) error) error {
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return err
	}
	return s.withLeaseOn(ctx, d, root, nil, func(_ context.Context, root storage.Backend, l lease.Lease) error { return fn(root, l) })
}

// withLeaseOn is WithLease on the opened root, in the root's line at the
// place taken in places (if any), and within the places' bound on the
// publications running at once once the turn is its own. The lease is the
// one the last publication of this Service into the root left (HandOver),
// or a new one. fn's context ends as soon as the lease is lost
// (watchLease).
func (s *Service) withLeaseOn(ctx context.Context, d config.Destination, root storage.Backend, places *Places, fn func(ctx context.Context, root storage.Backend, l lease.Lease) error) error {
	start := time.Now()

	// The line of this process's publications into the root is waited
	// for while it moves; when none ahead left it for LeaseWait, the lease
	// is asked for at once and reports who holds it.
	place := places.claim(d.RootKey())
	if place == nil {
		place = s.turns.join(d.RootKey())
	}
	ok, before, by := place.wait(ctx, s.LeaseWait)
	if by != nil {
		return passedOverError(place, d, *by)
	}
	if !ok {
		place = nil
		if s.LeaseWait > 0 && ctx.Err() == nil {
			// Says what held the line up: a holder of this process, or
			// earlier events still on their way (a slow bundle store).
			log := s.logger(ctx)
			log.Warn().Str("root", d.RootKey()).Dur("lease_wait", s.LeaseWait).Int("ahead_publishing", before.publishing).
				Int("ahead_on_their_way", before.onTheWay).Msg("waited the lease wait for the root's turn; asking for the lease anyway")
		}
	}
	release, err := places.run(ctx)
	if err != nil {
		if place != nil {
			place.done(ctx)
		}
		return err
	}
	defer release() // after giveBack: releasing the lease is part of the publication

	// Another process's holder is waited for up to LeaseWait from the
	// turn; a publication that gave up waiting for the turn asks once.
	deadline := time.Now()
	if ok {
		deadline = deadline.Add(s.LeaseWait)
	}
	h, err := s.hold(ctx, place, lease.Root{Key: d.RootKey(), Store: root, Destination: d.ID}, start, deadline)
	if err != nil {
		if place != nil {
			place.done(ctx)
		}
		return err
	}
	defer s.giveBack(ctx, place, h, root)
	wctx, stop := s.watchLease(ctx, h.l, d)
	defer stop()
	return Named(wctx, fn(wctx, root, h.l))
}

// leaseCheckInterval is how often watchLease asks a held lease whether it
// is lost: a loss comes from a deadline passing or a failed renewal, and
// a lease has no channel that says so.
const leaseCheckInterval = 100 * time.Millisecond

// watchLease returns ctx cancelled as soon as l is lost, with the loss as
// its cause: a publication stuck in a storage call (a hung or trickling
// server) stops at once instead of at its next check of l.Err, which a
// call that never returns never reaches. The loss is logged at warn.
func (s *Service) watchLease(ctx context.Context, l lease.Lease, d config.Destination) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(leaseCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if err := l.Err(); err != nil {
				log := s.logger(ctx)
				log.Warn().Err(err).Str("root", d.RootKey()).Msg("lease lost; cancelling the publication's storage calls")
				cancel(err)
				return
			}
		}
	}()
	return wctx, func() { close(done); cancel(nil) }
}

// hold returns the lease left on the seat if it is still held, or
// acquires one, waiting for another holder until deadline. Either way its
// renewal follows ctx until giveBack.
func (s *Service) hold(ctx context.Context, place *seat, root lease.Root, start, deadline time.Time) (*holding, error) {
	if place != nil {
		if h := place.pick(); h != nil {
			if h.l.Err() == nil {
				h.bind(ctx)
				if s.LeaseWaited != nil {
					s.LeaseWaited(time.Since(start))
				}
				return h, nil
			}

			// Lost while it was handed on: a new holder, a new token.
			_ = h.release(context.WithoutCancel(ctx))
		}
	}

	// The renewal's own context: ctx ends it while this publication uses
	// the lease (bind), a later one's context after a hand-over.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &holding{cancel: cancel}
	h.bind(ctx)
	l, err := s.acquire(lctx, root, start, deadline)
	if err != nil {
		h.unbind()
		cancel()
		return nil, err
	}
	h.l, h.since = l, time.Now()
	return h, nil
}

// giveBack leaves the lease to the next publication waiting on the seat,
// within HandOver's bounds and while it is held, or releases it; then it
// gives up the turn.
func (s *Service) giveBack(ctx context.Context, place *seat, h *holding, root storage.Backend) {
	// false: ctx ended while the lease was in use, which ended its renewal.
	live := h.unbind()
	if place != nil {
		defer place.done(ctx)
		if live && s.mayHandOver(h) && place.leaveLease(h) {
			return
		}
	}
	if err := h.release(context.WithoutCancel(ctx)); err != nil {
		log := s.logger(ctx)
		log.Warn().Err(err).Str("root", root.String()).Msg("lease release failed; it expires on its own")
	}
}

// mayHandOver reports whether h may serve one more publication.
func (s *Service) mayHandOver(h *holding) bool {
	if h.uses >= s.HandOver.Max || (s.HandOver.For > 0 && time.Since(h.since) >= s.HandOver.For) {
		return false
	}
	return h.l.Err() == nil // a lost lease is never handed on
}

// acquire takes the lease, waiting until deadline while it is held;
// LeaseWaited is told the time since start.
func (s *Service) acquire(ctx context.Context, root lease.Root, start, deadline time.Time) (lease.Lease, error) {
	pause := 50 * time.Millisecond
	for {
		l, err := s.Locker.Acquire(ctx, root)
		if err == nil && s.LeaseWaited != nil {
			s.LeaseWaited(time.Since(start))
		}
		if err == nil || !errors.Is(err, lease.ErrHeld) || !time.Now().Add(pause).Before(deadline) {
			return l, err
		}

		// Jitter keeps waiters on one root from retrying in lockstep; the
		// cap keeps a released root from idling long.
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause/2 + rand.N(pause)):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
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
