package main

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/stores"
)

// directSession is what a command that mutates roots outside `serve` uses:
// the KV lease and an event publisher when NATS is there, the lock object
// in the root otherwise.
type directSession struct {
	runner    *engine.Runner
	publisher *events.Publisher // nil without NATS
	close     func()
}

// directSession connects to NATS when nats.url is set (it must answer) or,
// without nats.url, when a running `serve` of this configuration advertises
// its embedded server (see advertFile); otherwise it runs in direct mode
// with the lock object in each root. It never dials nats.listen blindly:
// whatever else listens there is a stranger's.
func (a *app) directSession(ctx context.Context, cfg *config.Config) (*directSession, error) {
	s := &directSession{
		runner: &engine.Runner{
			Engine: &engine.Engine{Version: version, Log: a.log, Now: a.now},
			Config: cfg,
			Stores: stores.New(cfg),
			Locker: lease.NewStorageLocker(holderName("direct"), directLockTTL),
			// Two destinations of a pipeline may share a root; a concurrent
			// run elsewhere usually finishes soon.
			LeaseWait: 10 * time.Second,
		},
		close: func() {},
	}
	if a.wrapStores != nil {
		s.runner.Stores = a.wrapStores(s.runner.Stores)
	}
	url := cfg.NATS.URL
	var ad *advert
	if url == "" {
		found, err := findAdvert(cfg)
		if err != nil {
			a.log.Debug().Err(err).Msg("no serve of this configuration advertises NATS; direct mode with a lock object in each root")
			return s, nil
		}
		ad, url = &found, found.URL
	}
	timeout := 5 * time.Second
	if ad != nil {
		timeout = time.Second // a local server answers at once
	}
	nc, err := nats.Connect(url, append(natsOptions(cfg.NATS), nats.Timeout(timeout))...)
	if err != nil {
		if ad != nil && errors.Is(err, nats.ErrNoServers) {
			// serve is stopping; the lock object alone still excludes it.
			a.log.Debug().Err(err).Str("url", url).Msg("the NATS server serve advertises is gone; direct mode with a lock object in each root")
			return s, nil
		}
		return nil, connectError(cfg.NATS, url, err, false)
	}
	if ad != nil && (nc.ConnectedServerId() != ad.ServerID || nc.ConnectedServerName() != ad.ServerName) {
		// A stale advertisement: another server took the address.
		nc.Close()
		a.log.Debug().Str("url", url).Msg("the NATS server there is not the one serve advertised; direct mode with a lock object in each root")
		return s, nil
	}
	js, streams, err := setupStreams(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// The lock object fences the run; the KV lease only keeps `serve` off
	// the root, so NATS going away mid-run does not waste the run.
	s.runner.Locker = lease.WithAdvisory(lease.NewKV(js, streams.Leases, holderName("direct"), a.kvLeaseTTL()), s.runner.Locker)
	s.publisher = events.NewPublisher(js, streams.Subjects)
	s.close = nc.Close
	a.log.Debug().Str("url", config.RedactURL(url)).Msg("using NATS for leases and events")
	return s, nil
}

// reportTimeout bounds the publication of a direct-mode result event.
const reportTimeout = 5 * time.Second

// report publishes a maintenance event when NATS is there.
func (s *directSession) report(ctx context.Context, a *app, r events.Result) {
	if s.publisher == nil {
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
	if err := s.publisher.PublishResult(pctx, r); err != nil {
		a.log.Warn().Err(err).Str("type", r.Type).Msg("could not publish the maintenance event")
	}
}
