package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// Stores opens backends for destinations and bundle locations.
type Stores interface {
	Destination(ctx context.Context, d config.Destination) (storage.Backend, error)
	Bundle(ctx context.Context, location string) (storage.Backend, error)
}

// Runner publishes a pipeline's bundle to its configured destinations: it
// resolves config, opens the bundle, takes each root's lease and runs the
// engine. Both `apply` and the consumer use it.
type Runner struct {
	Engine *Engine
	Config *config.Config
	Stores Stores
	Locker lease.Locker
	// LeaseWait is how long to keep trying when another live holder has a
	// root's lease (0: fail at once with lease.ErrHeld). Destinations of one
	// bundle that share a root then run one after the other instead of
	// failing the event.
	LeaseWait time.Duration
	// LeaseWaited, when set, is told how long each lease acquisition that
	// succeeded took, waiting for another holder included (metrics).
	LeaseWaited func(time.Duration)

	// HandOver lets a root's lease pass from one publication to the next
	// of this Runner queued for the same root, instead of a release and a
	// new acquisition (zero: never). See docs/guarantees.md, "Leases".
	HandOver HandOver

	// turns queues this process's publications into one root (rootTurns).
	turns rootTurns
}

// HandOver bounds how long one lease serves the publications queued in
// one process for its root. A lease is handed on only while it is held
// (Err is nil), to a publication of the same Runner that waits for the
// root's turn, and only after the one before returned: the holder does
// not change, so neither does the token. The bounds make the process
// release and acquire the lease again from time to time, as it did
// between every two publications before, which is where another
// process waiting for the root gets its chance and the token grows.
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

// Request names a bundle and where it goes.
type Request struct {
	PipelineID string
	Bundle     string // location
	// ManifestDigest, when set, must match the manifest's bytes.
	ManifestDigest string
	// Destinations restricts the pipeline's destinations (empty = all).
	Destinations  []string
	BundleEventID string
	TakeOwnership bool
	// AllowOlder publishes a bundle older than the version of the same
	// source the destination holds (an operator's roll back).
	AllowOlder bool
	// Places, when set, are the places in the roots' lines taken when the
	// event was delivered (Runner.Queue); nil: join at Publish.
	Places *Places
}

// ErrUnknownPipeline / ErrUnknownDestination: the request names something
// the configuration does not have.
var (
	ErrUnknownPipeline    = errors.New("unknown pipeline")
	ErrUnknownDestination = errors.New("unknown destination")
)

// Destinations resolves the request's destinations in config order.
func (r *Runner) Destinations(req Request) ([]config.Destination, error) {
	p, ok := r.Config.Pipeline(req.PipelineID)
	if !ok {
		return nil, fmt.Errorf("%w %q: %s", ErrUnknownPipeline, req.PipelineID, r.Config.KnownPipelines())
	}
	want := map[string]bool{}
	for _, id := range req.Destinations {
		want[id] = true
	}
	var out []config.Destination
	for _, id := range p.Destinations {
		if len(req.Destinations) > 0 && !want[id] {
			continue
		}
		delete(want, id)
		d, ok := r.Config.Destination(id)
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownDestination, id)
		}
		out = append(out, d)
	}
	for _, id := range req.Destinations {
		if want[id] {
			return nil, fmt.Errorf("%w %q: pipeline %q publishes to %v", ErrUnknownDestination, id, req.PipelineID, p.Destinations)
		}
	}
	return out, nil
}

// OpenBundle opens and checks the bundle named by the request.
func (r *Runner) OpenBundle(ctx context.Context, req Request) (*bundle.Bundle, error) {
	store, err := r.Stores.Bundle(ctx, req.Bundle)
	if err != nil {
		return nil, err
	}
	return bundle.Open(ctx, store, req.Bundle, req.ManifestDigest)
}

// Publication builds the publication of b to d.
func (r *Runner) Publication(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (Publication, error) {
	outs, err := Desire(ctx, d, req.PipelineID, b)
	if err != nil {
		return Publication{}, fmt.Errorf("destination %q: %w", d.ID, err)
	}
	return Publication{
		Owner:         catalog.Owner{PipelineID: req.PipelineID, DestinationID: d.ID},
		Workflow:      d.Workflow,
		Source:        catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()},
		BundleEventID: req.BundleEventID,
		Outputs:       outs,
		Bundle:        b,
		MaxDeletes:    d.MaxDeletes,
		TakeOwnership: req.TakeOwnership,
		AllowOlder:    req.AllowOlder,
	}, nil
}

// Publish runs one destination of the request under its root's lease.
func (r *Runner) Publish(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (Result, error) {
	res := Result{Root: d.RootKey()}
	pub, err := r.Publication(ctx, req, b, d)
	var root storage.Backend
	if err == nil {
		root, err = r.Stores.Destination(ctx, d)
	}
	if err != nil {
		req.Places.giveUp(ctx, d.RootKey()) // the root's line moves on
		return res, err
	}
	err = r.withLeaseOn(ctx, d, root, req.Places, func(root storage.Backend, l lease.Lease) error {
		var err error
		res, err = r.engineFor(ctx, l).publish(ctx, root, l, pub, nil)
		res.LeaseToken = l.Token()
		return err
	})
	return res, err
}

// engineFor is the engine of one publication under l: its lines carry
// the caller's fields (WithLog) and the lease token.
func (r *Runner) engineFor(ctx context.Context, l lease.Lease) *Engine {
	eng := *r.Engine
	eng.Log = LogFrom(ctx, r.Engine.Log).With().Str("lease_token", l.Token()).Logger()
	return &eng
}

// PublishOpening is Publish of a bundle still being opened: open runs
// in the background while the root's lease is taken and its catalog read
// (the manifest's read and parse leave the critical path), and the
// publication waits for it only when it needs the outputs, or before
// recovering an interrupted run. It returns the bundle open gave (nil if
// it failed) and, when open failed, open's error: a bundle that cannot be
// used changes nothing but the lease's own lock object, and only in a
// root that already holds a catalog — a fresh root (no lease objects
// yet) is not touched before the bundle is known good.
func (r *Runner) PublishOpening(ctx context.Context, req Request, open func(context.Context) (*bundle.Bundle, error), d config.Destination) (Result, *bundle.Bundle, error) {
	res := Result{Root: d.RootKey()}
	root, err := r.Stores.Destination(ctx, d)
	if err != nil {
		req.Places.giveUp(ctx, d.RootKey()) // the root's line moves on
		// The bundle's error first, as when it is opened first.
		b, berr := open(ctx)
		if berr != nil {
			return res, nil, berr
		}
		return res, b, err
	}
	if _, err := root.Stat(ctx, catalog.FileName); err != nil {
		b, err := open(ctx)
		if err != nil {
			return res, nil, err
		}
		res, err = r.Publish(ctx, req, b, d)
		return res, b, err
	}
	var b *bundle.Bundle
	var berr error
	var full Publication
	var perr error
	opened := make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(opened)
		if b, berr = open(ctx); berr != nil {
			cancel() // no point waiting for a held lease
			return
		}
		full, perr = r.Publication(ctx, req, b, d)
	}()
	opening := &opening{done: opened, wait: func() (Publication, error) {
		<-opened
		if berr != nil {
			return Publication{}, berr
		}
		return full, perr
	}}
	pub := Publication{Owner: catalog.Owner{PipelineID: req.PipelineID, DestinationID: d.ID}, Workflow: d.Workflow,
		BundleEventID: req.BundleEventID, MaxDeletes: d.MaxDeletes, TakeOwnership: req.TakeOwnership, AllowOlder: req.AllowOlder}
	err = r.withLeaseOn(lctx, d, root, req.Places, func(root storage.Backend, l lease.Lease) error {
		var err error
		res, err = r.engineFor(ctx, l).publish(lctx, root, l, pub, opening)
		res.LeaseToken = l.Token()
		return err
	})
	<-opened
	if berr != nil {
		return Result{Root: d.RootKey()}, nil, berr // the bundle's error, as when it is opened first
	}
	return res, b, err
}

// WithLease opens d's root, holds the root's lease while fn runs, and
// releases it afterwards.
func (r *Runner) WithLease(ctx context.Context, d config.Destination, fn func(root storage.Backend, l lease.Lease) error) error {
	root, err := r.Stores.Destination(ctx, d)
	if err != nil {
		return err
	}
	return r.withLeaseOn(ctx, d, root, nil, fn)
}

// withLeaseOn is WithLease on the opened root, in the root's line at the
// place taken in places (if any). The lease is the one the last
// publication of this Runner into the root left (HandOver), or a new one.
func (r *Runner) withLeaseOn(ctx context.Context, d config.Destination, root storage.Backend, places *Places, fn func(root storage.Backend, l lease.Lease) error) error {
	start := time.Now()
	// Waiting for this process's own holders counts toward LeaseWait; past
	// it, the lease is asked for anyway and reports who holds it.
	s := places.claim(d.RootKey())
	if s == nil {
		s = r.turns.join(d.RootKey())
	}
	if ok, before := s.wait(ctx, start.Add(r.LeaseWait)); !ok {
		s = nil
		if r.LeaseWait > 0 && ctx.Err() == nil {
			// Says what held the line up: a holder of this process, or
			// earlier events still on their way (a slow bundle store).
			log := LogFrom(ctx, r.Engine.Log)
			log.Warn().Str("root", d.RootKey()).Dur("lease_wait", r.LeaseWait).Int("ahead_publishing", before.publishing).
				Int("ahead_on_their_way", before.onTheWay).Msg("waited the lease wait for the root's turn; asking for the lease anyway")
		}
	}
	h, err := r.hold(ctx, s, lease.Root{Key: d.RootKey(), Store: root}, start)
	if err != nil {
		if s != nil {
			s.done(ctx)
		}
		return err
	}
	defer r.giveBack(ctx, s, h, root)
	return fn(root, h.l)
}

// hold returns the lease left on the seat if it is still held, or
// acquires one. Either way its renewal follows ctx until giveBack.
func (r *Runner) hold(ctx context.Context, s *seat, root lease.Root, start time.Time) (*holding, error) {
	if s != nil {
		if h := s.pick(); h != nil {
			if h.l.Err() == nil {
				h.bind(ctx)
				if r.LeaseWaited != nil {
					r.LeaseWaited(time.Since(start))
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
	l, err := r.acquire(lctx, root, start)
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
func (r *Runner) giveBack(ctx context.Context, s *seat, h *holding, root storage.Backend) {
	// false: ctx ended while the lease was in use, which ended its renewal.
	live := h.unbind()
	if s != nil {
		defer s.done(ctx)
		if live && r.mayHandOver(h) && s.leaveLease(h) {
			return
		}
	}
	if err := h.release(context.WithoutCancel(ctx)); err != nil {
		log := LogFrom(ctx, r.Engine.Log)
		log.Warn().Err(err).Str("root", root.String()).Msg("lease release failed; it expires on its own")
	}
}

// mayHandOver reports whether h may serve one more publication.
func (r *Runner) mayHandOver(h *holding) bool {
	if h.uses >= r.HandOver.Max || (r.HandOver.For > 0 && time.Since(h.since) >= r.HandOver.For) {
		return false
	}
	return h.l.Err() == nil // a lost lease is never handed on
}

// Plan computes the plan of one destination without a lease or any write.
func (r *Runner) Plan(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (Result, error) {
	pub, err := r.Publication(ctx, req, b, d)
	if err != nil {
		return Result{}, err
	}
	root, err := r.Stores.Destination(ctx, d)
	if err != nil {
		return Result{}, err
	}
	p, err := r.Engine.Plan(ctx, root, pub)
	return Result{Root: root.String(), Plan: p}, err
}

// acquire takes the lease, waiting up to LeaseWait while it is held.
func (r *Runner) acquire(ctx context.Context, root lease.Root, start time.Time) (lease.Lease, error) {
	deadline := start.Add(r.LeaseWait)
	pause := 50 * time.Millisecond
	for {
		l, err := r.Locker.Acquire(ctx, root)
		if err == nil && r.LeaseWaited != nil {
			r.LeaseWaited(time.Since(start))
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
