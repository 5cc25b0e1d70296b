package main

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/stores"
)

// directSession is what a command that mutates roots outside `serve` uses:
// the KV lease and an event publisher when NATS is there, the lock object
// in the root otherwise.
type directSession struct {
	svc    *service.Service
	ledger *service.Ledger // nil without NATS
	close  func()
}

// directLeaseWait is how long a direct-mode run waits for a root another
// run holds: two destinations of a pipeline may share a root, and a
// concurrent run elsewhere usually finishes soon.
const directLeaseWait = 10 * time.Second

// directSession connects to NATS when nats.url is set (it must answer) or,
// without nats.url, when a running `serve` of this configuration advertises
// its embedded server (see advertFile); otherwise it runs in direct mode
// with the lock object in each root. It never dials nats.listen blindly:
// whatever else listens there is a stranger's.
func (a *app) directSession(ctx context.Context, cfg *config.Config) (*directSession, error) {
	wait := directLeaseWait
	if a.leaseWait > 0 {
		wait = a.leaseWait
	}
	s := &directSession{svc: a.newService(cfg, a.log, lease.NewStorageLocker(holderName("direct"), directLockTTL, lease.WithLog(a.log)), wait), close: func() {}}
	nc, err := a.connectKnownNATS(cfg)
	if errors.Is(err, errNoNATS) {
		a.log.Debug().Msg("direct mode with a lock object in each root")
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	js, streams, err := setupStreams(ctx, nc, cfg, zerolog.Nop())
	if err != nil {
		nc.Close()
		return nil, err
	}

	// The lock object fences the run; the KV lease only keeps `serve` off
	// the root, so NATS going away mid-run does not waste the run.
	s.svc.Locker = lease.WithAdvisory(lease.NewKV(js, streams.Leases, holderName("direct"), a.kvLeaseTTL()), s.svc.Locker)
	s.ledger = service.NewLedger(s.svc, js, streams.Subjects, a.log)
	s.close = nc.Close
	a.log.Debug().Str("url", nc.ConnectedUrlRedacted()).Msg("using NATS for leases and events")
	return s, nil
}

// newService is the publication service of every command: they differ
// only in the lease (who holds it, how long to wait for a held one) and
// where the outcomes go. plan takes no lease (locker nil).
func (a *app) newService(cfg *config.Config, log zerolog.Logger, locker lease.Locker, leaseWait time.Duration) *service.Service {
	st := stores.New(cfg)

	// Said as it happens: a hung or trickling S3 server otherwise shows
	// only once the run fails, if ever.
	st.Warn = func(ctx context.Context, err error) {
		l := zerolog.Ctx(ctx)
		if l.GetLevel() == zerolog.Disabled {
			l = &log
		}
		if inMemory := (*s3store.InMemoryError)(nil); errors.As(err, &inMemory) {
			l.Warn().Msg(inMemory.Error())
			return
		}
		l.Warn().Err(err).Msg("S3 request cut (the SDK may try it again)")
	}
	svc := &service.Service{Engine: service.NewEngine(version, a.now, log), Config: cfg, Stores: st,
		Locker: locker, LeaseWait: leaseWait, Parallel: cfg.DestinationParallelism, Timeout: time.Duration(cfg.PublicationTimeout)}
	if a.wrapStores != nil {
		svc.Stores = a.wrapStores(svc.Stores)
	}
	return svc
}

// serveLocker is the lease of serve and the demo: the KV lease fences
// serve processes; the lock object in the root also excludes direct-mode
// runs on hosts without NATS.
func serveLocker(js jetstream.JetStream, streams *events.Streams, role string, log zerolog.Logger) lease.Locker {
	return lease.Both(lease.NewKV(js, streams.Leases, holderName(role), serveLeaseTTL),
		lease.NewStorageLocker(holderName(role), serveLeaseTTL, lease.WithLog(log)))
}

// reportTimeout bounds the publication of a direct-mode result event.
const reportTimeout = 5 * time.Second

// report publishes a maintenance event when NATS is there.
func (s *directSession) report(ctx context.Context, a *app, r events.Result) {
	if s.ledger == nil {
		return
	}
	if r.ID == "" && r.BundleEventID == "" {
		r.ID = events.NewEventID() // publication results get their deterministic id
	}

	// Bounded: NATS may have gone away during the run.
	timeout := reportTimeout
	if a.reportWait > 0 {
		timeout = a.reportWait
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := s.ledger.Publish(pctx, r); err != nil {
		a.log.Warn().Err(err).Str("type", r.Type).Msg("could not publish the maintenance event")
	}
}

// maintain runs a maintenance step (prune, reconcile-state) on d's root
// under its lease, drawing progress under d's name.
func (s *directSession) maintain(ctx context.Context, a *app, d config.Destination,
	step func(context.Context) (service.MaintenanceResult, error)) (service.MaintenanceResult, error) {
	pctx, done := a.withProgress(ctx, d.ID)
	defer done()
	return step(pctx)
}
