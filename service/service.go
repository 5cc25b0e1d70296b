// Package service publishes bundles: the one door through which `serve`
// (for each bundle-ready event), `apply`, `plan`, the demo and `publish`
// reach the destinations. It resolves a request's destinations, opens
// the bundle once, runs each destination's publication under its root's
// lease (engine.Engine does the publication itself) with one concurrency
// policy, classifies every error with one table (Classify) and builds the
// result events (ResultEvent). Callers differ only in how the lease is
// obtained (Locker, LeaseWait, HandOver) and where the outcomes go.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// Stores opens backends for destinations and bundle locations.
type Stores interface {
	Destination(ctx context.Context, d config.Destination) (storage.Backend, error)
	Bundle(ctx context.Context, location string) (storage.Backend, error)
}

// Service publishes a pipeline's bundle to its configured destinations.
type Service struct {
	Engine *engine.Engine
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
	// of this Service queued for the same root, instead of a release and a
	// new acquisition (zero: never). See docs/guarantees.md, "Leases".
	HandOver HandOver

	// Parallel bounds how many destinations of one request publish at
	// once (0: DefaultParallel).
	Parallel int

	// Timeout bounds the publication of each destination, the wait for
	// its root's lease included (0: none); past it the publication's
	// storage calls are cancelled and it fails with a *DeadlineError.
	Timeout time.Duration

	// Clock, when set, is this host's clock for the bundles no event's
	// stored time judges (Request.StoredAt); nil: time.Now.
	Clock func() time.Time

	// Around, when set, wraps the publication of each destination: the
	// context it returns is the publication's (a progress display), and
	// done is called when it ends.
	Around func(ctx context.Context, d config.Destination) (_ context.Context, done func())

	// turns queues this process's publications into one root (rootTurns).
	turns rootTurns
}

// DefaultParallel is how many destinations of one request publish at
// once unless Service.Parallel says otherwise: enough to overlap the
// waits of a few roots, few enough that an event fanned out to thousands
// of destinations does not open thousands of leases at once.
const DefaultParallel = 16

// DeadlineError is the cause of a context whose time limit ran out: the
// error of a publication that did not finish in time names the limit and
// where it is set. It is a context.DeadlineExceeded (transient).
type DeadlineError struct {
	// What ran out of time ("the publication", "apply").
	What  string
	Limit time.Duration

	// Setting is where the limit comes from ("publication_timeout",
	// "--timeout").
	Setting string
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("%s did not finish within %s (%s)", e.What, e.Limit, e.Setting)
}

func (e *DeadlineError) Unwrap() error { return context.DeadlineExceeded }

// WithDeadline is ctx ending after limit with a *DeadlineError as its
// cause (see Named).
func WithDeadline(ctx context.Context, what string, limit time.Duration, setting string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, limit, &DeadlineError{What: what, Limit: limit, Setting: setting})
}

// Named adds to err, the error of work run under ctx, why ctx ended when
// that is a *DeadlineError or a lost lease that err does not name yet:
// "context canceled" alone says nothing of a time limit or a lease.
func Named(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	var de *DeadlineError
	switch {
	case errors.As(cause, &de) && !errors.As(err, &de):
		return fmt.Errorf("%w: %w", de, err)
	case errors.Is(cause, lease.ErrLost) && !errors.Is(err, lease.ErrLost):
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

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

	// DeleteLater, with AllowOlder, makes an additive roll back also
	// delete the owner's paths that only newer versions of the source
	// wrote (see events.BundleReady.DeleteLater).
	DeleteLater bool

	// RollbackOf marks an operator's roll back (`distributor rollback`);
	// with AllowOlder, the published result carries it (see
	// events.BundleReady.RollbackOf).
	RollbackOf string

	// Places, when set, are the places in the roots' lines taken when the
	// event was delivered (Service.Queue); nil: join at Publish.
	Places *Places

	// StoredAt is when NATS stored the bundle-ready event (its stream
	// timestamp, the same on every host): the bundle's created time is
	// judged against it. Zero (no event, direct mode): against this
	// host's clock (Service.Clock).
	StoredAt time.Time
}

// ErrUnknownPipeline / ErrUnknownDestination: the request names something
// the configuration does not have.
var (
	ErrUnknownPipeline    = errors.New("unknown pipeline")
	ErrUnknownDestination = errors.New("unknown destination")
)

// Destinations resolves the request's destinations in config order.
func (s *Service) Destinations(req Request) ([]config.Destination, error) {
	return Destinations(s.Config, req)
}

// Destinations resolves req's destinations in cfg, in config order.
func Destinations(cfg *config.Config, req Request) ([]config.Destination, error) {
	p, ok := cfg.Pipeline(req.PipelineID)
	if !ok {
		return nil, fmt.Errorf("%w %q: %s", ErrUnknownPipeline, req.PipelineID, cfg.KnownPipelines())
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
		d, ok := cfg.Destination(id)
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

// CheckBundle refuses a bundle that lies outside its pipeline's
// bundle_locations (config.ErrBundleNotAllowed), local paths compared as
// they resolve on disk, before anything of it is read: a producer may
// announce only the bundles of its own pipeline's folders or prefixes. A
// pipeline that is not configured passes (Destinations reports it).
func CheckBundle(cfg *config.Config, req Request) error {
	p, ok := cfg.Pipeline(req.PipelineID)
	if !ok {
		return nil
	}
	return p.AllowsBundle(req.Bundle, config.ResolvePath)
}

// OpenBundle opens and checks the bundle named by the request, once
// CheckBundle allows it: a bundle created more than max_clock_skew after
// the time NATS stored its event is refused (checkCreated).
func (s *Service) OpenBundle(ctx context.Context, req Request) (*bundle.Bundle, error) {
	b, err := openBundle(ctx, s.Config, s.Stores, req, 0)
	if err != nil {
		return nil, err
	}
	if err := s.checkCreated(b.Manifest.Created, req.StoredAt); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", req.Bundle, err)
	}
	return b, nil
}

// OpenBundle opens the bundle named by req from st and reads its manifest,
// once CheckBundle allows its location, judging its created time against
// this host's clock (the producer's side, before an event exists).
func OpenBundle(ctx context.Context, cfg *config.Config, st Stores, req Request) (*bundle.Bundle, error) {
	return openBundle(ctx, cfg, st, req, cfg.ClockSkew())
}

// openBundle opens the bundle. A local folder is checked again once it is
// open (config.Pipeline.AllowsOpenedBundle), and the manifest and every
// file are then read through that open folder only: a link re-pointed
// between the check and the open cannot lead to another pipeline's bundle.
// A skew above 0 refuses a created time later than this host's clock plus it.
func openBundle(ctx context.Context, cfg *config.Config, st Stores, req Request, skew time.Duration) (*bundle.Bundle, error) {
	if err := CheckBundle(cfg, req); err != nil {
		return nil, err
	}
	store, err := st.Bundle(ctx, req.Bundle)
	if err != nil {
		return nil, err
	}
	if err := checkOpenedBundle(cfg, req, store); err != nil {
		return nil, err
	}
	return bundle.Open(ctx, store, req.Bundle, req.ManifestDigest, skew)
}

// checkOpenedBundle refuses a local bundle folder, once open, that is not
// inside its pipeline's bundle_locations.
func checkOpenedBundle(cfg *config.Config, req Request, store storage.Backend) error {
	p, ok := cfg.Pipeline(req.PipelineID)
	if !ok {
		return nil
	}
	loc, err := bundle.ParseLocation(req.Bundle)
	if err != nil || loc.Scheme != "file" || len(p.BundleLocations) == 0 {
		return nil // S3 has no links to re-point; a bad location fails to open
	}
	folder := store.Properties().HeldFolder
	if folder == nil {
		// Refused rather than trusted: the folder opened cannot be told.
		return fmt.Errorf("%w: bundle %s of pipeline %q: the store opened for it does not say which folder it holds, so it cannot be checked against bundle_locations",
			config.ErrBundleNotAllowed, req.Bundle, p.ID)
	}
	return p.AllowsOpenedBundle(req.Bundle, folder)
}

// checkCreated refuses a bundle created more than max_clock_skew after
// the event was stored, or without an event after this host's clock: every
// serve judges an event alike, whatever its own clock says.
func (s *Service) checkCreated(created, storedAt time.Time) error {
	skew := s.Config.ClockSkew()
	if storedAt.IsZero() {
		now := time.Now()
		if s.Clock != nil {
			now = s.Clock()
		}
		return bundle.CheckCreated(created, now, skew)
	}
	if skew <= 0 || !created.After(storedAt.Add(skew)) {
		return nil
	}
	return fmt.Errorf("%w: created %s is later than the time NATS stored its bundle-ready event (%s) plus max_clock_skew (%s); fix the producer's clock and create the bundle again",
		bundle.ErrFutureCreated, created.UTC().Format(time.RFC3339Nano), storedAt.UTC().Format(time.RFC3339), skew)
}

// Done is what the publication of one destination came to.
type Done struct {
	Destination config.Destination
	Result      engine.Result

	// Err is the publication's error (Classify says what it means); the
	// bundle's own when it could not be opened.
	Err error

	// Took is how long the publication ran.
	Took time.Duration
}

// Publish publishes the request's bundle to dests (resolved with
// Destinations), each under its root's lease, at most Parallel at once,
// and returns what each came to, in the order of dests. The bundle is
// opened once, while the first leases are taken; it is returned, or nil
// when it could not be opened: then every Done carries the bundle's
// error, and no root changed but for the lease's own lock object in
// roots that hold a catalog already (none at all when CheckBundle refuses
// the bundle).
func (s *Service) Publish(ctx context.Context, req Request, dests []config.Destination) (*bundle.Bundle, []Done) {
	if err := CheckBundle(s.Config, req); err != nil {
		// Refused before any root is opened: not even a lease's lock
		// object is written.
		done := make([]Done, len(dests))
		for i, d := range dests {
			req.Places.giveUp(ctx, d.RootKey()) // the root's line moves on
			done[i] = Done{Destination: d, Result: engine.Result{Root: d.RootKey()}, Err: err}
		}
		return nil, done
	}
	ob := &openOnce{open: s.openNoted(req)}
	done := make([]Done, len(dests))
	run := func(i int) {
		d := dests[i]
		dctx, end := ctx, func() {}
		if s.Around != nil {
			dctx, end = s.Around(ctx, d)
		}
		log := s.logger(ctx).With().Str("destination_id", d.ID).Logger()
		dctx = log.WithContext(dctx)
		stop := func() {}
		if s.Timeout > 0 {
			var cancel context.CancelFunc
			dctx, cancel = WithDeadline(dctx, "the publication", s.Timeout, "publication_timeout")

			// Said as it happens: the storage calls in flight end now.
			logged := make(chan struct{})
			after := context.AfterFunc(dctx, func() { defer close(logged); logDeadline(dctx, log) })
			stop = func() {
				if !after() {
					<-logged // said before the publication's end is
				}
				cancel()
			}
		}
		start := time.Now()
		res, err := s.publishOne(dctx, req, ob.get, d)
		err = Named(dctx, err)
		stop()
		end()
		done[i] = Done{Destination: d, Result: res, Err: err, Took: time.Since(start)}
	}
	parallel := s.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	if len(dests) == 1 || parallel == 1 { // no goroutine (and stack) of its own
		for i := range dests {
			run(i)
		}
	} else {
		var wg sync.WaitGroup
		slots := make(chan struct{}, parallel)
		for i := range dests {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				run(i)
			})
		}
		wg.Wait()
	}
	b, err := ob.result()
	if err != nil {
		// Every destination ends with the bundle's error, as when it is
		// opened first; those that had not asked for it yet too.
		for i := range done {
			done[i] = Done{Destination: dests[i], Result: engine.Result{Root: dests[i].RootKey()}, Err: err, Took: done[i].Took}
		}
		return nil, done
	}
	return b, done
}

// logDeadline logs a publication whose time limit ran out, if that is
// why ctx ended.
func logDeadline(ctx context.Context, log zerolog.Logger) {
	var de *DeadlineError
	if errors.As(context.Cause(ctx), &de) {
		log.Warn().Err(de).Msg("publication timed out; cancelling its storage calls")
	}
}

// openNoted opens req's bundle (OpenBundle); once its manifest is read,
// the roots' lines know its version (Places.note), and a newer one of the
// same source waiting there may pass over it.
func (s *Service) openNoted(req Request) func(context.Context) (*bundle.Bundle, error) {
	return func(ctx context.Context) (*bundle.Bundle, error) {
		b, err := s.OpenBundle(ctx, req)
		if err == nil {
			req.Places.note(ctx, req, b)
		}
		return b, err
	}
}

// openOnce is the bundle of one request, opened by the first publication
// that asks for it (every later one gets the same answer).
type openOnce struct {
	once   sync.Once
	open   func(context.Context) (*bundle.Bundle, error)
	opened bool
	b      *bundle.Bundle
	err    error
}

func (o *openOnce) get(ctx context.Context) (*bundle.Bundle, error) {
	o.once.Do(func() { o.opened = true; o.b, o.err = o.open(ctx) })
	return o.b, o.err
}

// result is the bundle and its error once every publication returned;
// one that no publication asked for is opened now.
func (o *openOnce) result() (*bundle.Bundle, error) {
	o.once.Do(func() { o.opened = true; o.b, o.err = o.open(context.Background()) })
	return o.b, o.err
}

// publication builds the publication of req's bundle b to d.
func (s *Service) publication(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (engine.Publication, error) {
	pub, err := PublicationTo(ctx, d, req.PipelineID, b)
	if err != nil {
		return pub, err
	}
	pub.BundleEventID, pub.TakeOwnership, pub.AllowOlder = req.BundleEventID, req.TakeOwnership, req.AllowOlder
	pub.DeleteLater = req.AllowOlder && req.DeleteLater
	return pub, nil
}

// PublishTo runs one destination of the request, its bundle open, under
// its root's lease: what Publish runs for each destination once the
// bundle is open.
func (s *Service) PublishTo(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (engine.Result, error) {
	pub, err := s.publication(ctx, req, b, d)
	var root storage.Backend
	if err == nil {
		root, err = s.Stores.Destination(ctx, d)
	}
	if err != nil {
		req.Places.giveUp(ctx, d.RootKey()) // the root's line moves on
		return engine.Result{Root: d.RootKey()}, err
	}
	return s.publishOn(ctx, req, root, pub, d)
}

// publishOn runs pub on the opened root under its lease.
func (s *Service) publishOn(ctx context.Context, req Request, root storage.Backend, pub engine.Publication, d config.Destination) (engine.Result, error) {
	res := engine.Result{Root: d.RootKey()}
	err := s.withLeaseOn(ctx, d, root, req.Places, func(ctx context.Context, root storage.Backend, l lease.Lease) error {
		var err error
		res, err = s.engineFor(ctx, l).Publish(ctx, root, l, pub)
		res.LeaseToken = l.Token()
		return err
	})
	return res, err
}

// logger is the logger ctx carries (zerolog.Ctx), or the engine's when it
// carries none: a caller's fields, such as the event a publication
// belongs to, are on every line the publication logs.
func (s *Service) logger(ctx context.Context) zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return *l
	}
	return s.Engine.Log
}

// engineFor is the engine of one publication under l: its lines carry
// the caller's fields (the logger in ctx) and the lease token.
func (s *Service) engineFor(ctx context.Context, l lease.Lease) *engine.Engine {
	eng := *s.Engine
	eng.Log = s.logger(ctx).With().Str("lease_token", l.Token()).Logger()
	return &eng
}

// publishOne is PublishTo of a bundle still being opened: open runs in
// the background while the root's lease is taken (the manifest's read
// and parse leave the critical path), and the engine gets the whole
// publication once it is open. When open fails it returns open's error:
// a bundle that cannot be used changes nothing but the lease's own lock
// object, and only in a root that already holds a catalog — a fresh root
// (no lease objects yet) is not touched before the bundle is known good.
func (s *Service) publishOne(ctx context.Context, req Request, open func(context.Context) (*bundle.Bundle, error), d config.Destination) (engine.Result, error) {
	res := engine.Result{Root: d.RootKey()}
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		req.Places.giveUp(ctx, d.RootKey()) // the root's line moves on

		// The bundle's error first, as when it is opened first.
		if _, berr := open(ctx); berr != nil {
			return res, berr
		}
		return res, err
	}

	// A bundle that fails ends the wait for a held lease at once.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := s.startOpening(ctx, req, open, d, cancel)
	if !hasCatalog(ctx, root, o.bundled) {
		// A root without a catalog waits for the bundle.
		<-o.opened
		if err := o.err(); err != nil {
			req.Places.giveUp(ctx, d.RootKey())
			return res, err
		}
		return s.publishOn(ctx, req, root, o.pub, d)
	}
	err = s.withLeaseOn(lctx, d, root, req.Places, func(lctx context.Context, root storage.Backend, l lease.Lease) error {
		// The catalog is read and parsed while the bundle finishes opening.
		eng := s.engineFor(ctx, l)
		ahead := eng.ReadAhead(lctx, root)
		pub, err := o.wait(s.LeaseWait)
		if err != nil {
			ahead.Close()
			if errors.Is(err, errBundleSlow) {
				// Said as the lease goes back: the events behind in the
				// root's line go on without waiting for this one.
				log := s.logger(ctx)
				log.Warn().Str("root", d.RootKey()).Dur("lease_wait", s.LeaseWait).
					Msg("bundle still opening after the lease wait; giving the root's lease back and waiting for the bundle without it")
			}
			return err
		}
		pub.ReadAhead = ahead
		res, err = eng.Publish(lctx, root, l, pub)
		res.LeaseToken = l.Token()
		return err
	})
	<-o.opened
	if o.berr != nil {
		return engine.Result{Root: d.RootKey()}, o.berr // the bundle's error, as when it is opened first
	}
	if errors.Is(err, errBundleSlow) {
		if o.perr != nil {
			return engine.Result{Root: d.RootKey()}, o.perr
		}
		return s.publishOn(ctx, req, root, o.pub, d)
	}
	return res, err
}

// hasCatalog reports whether root holds a catalog, asked while the bundle
// opens: a bundle known good (bundled closed) before the answer comes
// makes the question moot (a slow server's answer is not waited for).
func hasCatalog(ctx context.Context, root storage.Backend, bundled <-chan struct{}) bool {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stat := make(chan error, 1)
	go func() {
		_, err := root.Stat(sctx, catalog.FileName)
		stat <- err
	}()
	select {
	case <-bundled:
		return false
	case err := <-stat:
		return err == nil
	}
}

// opening is the publication of one destination while its bundle opens.
type opening struct {
	bundled chan struct{} // closed once the bundle is open or failed to
	opened  chan struct{} // closed once pub is built or cannot be
	b       *bundle.Bundle
	berr    error
	pub     engine.Publication
	perr    error
}

// startOpening opens the bundle with open and builds its publication to d
// in the background; failed is called when the bundle cannot be opened.
func (s *Service) startOpening(ctx context.Context, req Request, open func(context.Context) (*bundle.Bundle, error), d config.Destination, failed func()) *opening {
	o := &opening{bundled: make(chan struct{}), opened: make(chan struct{})}
	go func() {
		defer close(o.opened)
		o.b, o.berr = open(ctx)
		close(o.bundled)
		if o.berr != nil {
			failed()
			return
		}
		o.pub, o.perr = s.publication(ctx, req, o.b, d)
	}()
	return o
}

// err is why the publication cannot run, once opened is closed.
func (o *opening) err() error {
	if o.berr != nil {
		return o.berr
	}
	return o.perr
}

// wait waits for the publication. Under the lease the bundle is waited
// for at most limit (the lease wait; 0: no bound): a hung bundle store
// must not keep the root from the events behind it. Past that the lease
// goes back (errBundleSlow) and the bundle is waited for without.
func (o *opening) wait(limit time.Duration) (engine.Publication, error) {
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-o.opened:
		case <-t.C:
			return engine.Publication{}, errBundleSlow
		}
	}
	<-o.opened
	return o.pub, o.err()
}

// errBundleSlow ends a publication holding a root's lease whose bundle
// takes longer than the lease wait to open; nothing was written yet.
var errBundleSlow = errors.New("the bundle is still opening")

// Plan computes the plan of one destination without a lease or any write.
func (s *Service) Plan(ctx context.Context, req Request, b *bundle.Bundle, d config.Destination) (engine.Result, error) {
	pub, err := s.publication(ctx, req, b, d)
	if err != nil {
		return engine.Result{}, err
	}
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return engine.Result{}, err
	}
	p, err := s.Engine.Plan(ctx, root, pub)
	return engine.Result{Root: root.String(), Plan: p}, err
}
