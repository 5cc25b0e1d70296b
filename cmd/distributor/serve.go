package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/metrics"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/service"
)

// serveLeaseTTL is how long a crashed serve process blocks a root; leases are
// renewed every third of it while work runs.
const serveLeaseTTL = 30 * time.Second

// serveOptions are serve's flags beyond the consumer's.
type serveOptions struct {
	// httpAddr overrides http.listen ("" keeps it).
	httpAddr string

	// connectTimeout bounds the retries of the first connection to
	// nats.url (0: retry until stopped).
	connectTimeout config.Duration
}

func (a *app) serveCommand() *cobra.Command {
	var natsURL string
	var workers int
	var so serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Consume bundle-ready events from NATS JetStream and publish them (embeds a NATS server when nats.url is not set)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if natsURL != "" {
				cfg.NATS.URL = natsURL
			}
			if so.httpAddr != "" {
				if msg := config.CheckHTTPListen(so.httpAddr); msg != "" {
					return usageErr("--http-addr %q: %s", so.httpAddr, msg)
				}
				cfg.HTTP.Listen = so.httpAddr
			}
			if so.connectTimeout < 0 {
				return usageErr("--connect-timeout %s: must not be negative (0 = retry until stopped)", so.connectTimeout)
			}
			if err := cfg.SecretsFromEnv(); err != nil {
				return err
			}
			return a.serve(cmd.Context(), cfg, so, consumerOptions(cfg, workers, a.log))
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", "", "NATS server URL (default: nats.url, else an embedded server)")
	cmd.Flags().IntVar(&workers, "workers", consumer.DefaultWorkers, "publications run at once (events waiting for their root's turn take none; 4 per worker are held)")
	cmd.Flags().StringVar(&so.httpAddr, "http-addr", "", `address of the status page (/, /status.json), /healthz, /readyz and /metrics, or "off" (default: http.listen, else `+config.DefaultHTTPListen+")")
	cmd.Flags().Var(&so.connectTimeout, "connect-timeout", "how long to retry the first connection to nats.url and the set-up of JetStream, e.g. 2m or 1h (default: until stopped)")
	return cmd
}

// serve runs the consumer until ctx ends (SIGINT/SIGTERM).
func (a *app) serve(ctx context.Context, cfg *config.Config, so serveOptions, opts consumer.Options) error {
	for _, w := range cfg.Warnings() {
		a.log.Warn().Msg(w)
	}
	a.doctorAtStart(ctx, cfg)
	ids := make([]string, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		ids[i] = d.ID
	}
	m := metrics.New(ids)
	ready := &readiness{}

	// Refreshed until serve returns, through the drain after the signal.
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	m.WatchConsumer(wctx, ready.consumerInfo, ready.natsConnected, consumerRefreshEvery, readyCheckTimeout)

	var cleanup undo
	defer cleanup.run()
	nc, err := a.serveNATS(ctx, cfg, so, observeHandler(ready, m, a.newStatusPage(cfg, ready)), &cleanup)
	if errors.Is(err, errStoppedConnecting) {
		a.log.Info().Msg("shutdown signal received while connecting to NATS; stopped")
		return nil
	}
	if err != nil {
		return err
	}
	cleanup.add(nc.Close)
	timeout := time.Duration(so.connectTimeout)
	var js jetstream.JetStream
	var streams *events.Streams
	err = a.waitForJetStream(ctx, timeout, "streams and lease bucket set up", func(ctx context.Context) (err error) {
		js, streams, err = setupStreams(ctx, nc, cfg, a.log)
		return err
	})
	opts.Observer = m
	var c *consumer.Consumer
	if err == nil {
		// What start set up, serve sets up again whenever NATS lacks it.
		opts.SetUp = func(ctx context.Context) error {
			_, _, err := setupStreams(ctx, nc, cfg, a.log)
			return err
		}
		c = consumer.New(js, streams.Subjects, a.serveService(cfg, js, streams, m, opts.SetUp), opts)
		err = a.waitForJetStream(ctx, timeout, "durable consumer set up", func(ctx context.Context) error {
			_, err := c.Durable(ctx)
			return err
		})
	}
	if errors.Is(err, errStoppedConnecting) {
		a.log.Info().Msg("shutdown signal received while setting up JetStream; stopped")
		return nil
	}
	if err != nil {
		return err
	}
	ready.connected(nc, streams, c.Restoring)
	waitNotify, err := a.startNotify(ctx, cfg, js, streams, m)
	if err != nil {
		return err
	}
	defer waitNotify()
	return a.runUntilStopped(ctx, c, ready)
}

// waitForJetStream runs the set-up step try, retried with back-off while
// JetStream does not answer (a cluster without a leader or without
// enough peers yet, another process creating the same thing): serve is
// not ready meanwhile. Each attempt is bounded, as a server may hang
// instead of failing. It gives up after timeout (0: never), as the first
// connection does, and returns errStoppedConnecting when ctx ends; done
// names the step for the log.
func (a *app) waitForJetStream(ctx context.Context, timeout time.Duration, done string, try func(context.Context) error) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	delay := connectFirstDelay
	for attempt := 1; ; attempt++ {
		end := time.Now().Add(setupAttemptTimeout)
		if !deadline.IsZero() && deadline.Before(end) {
			end = deadline
		}
		actx, cancel := context.WithDeadline(ctx, end)
		err := try(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				a.log.Info().Int("attempt", attempt).Msg("JetStream answered; " + done)
			}
			return nil
		}
		if ctx.Err() != nil {
			return errStoppedConnecting
		}
		if !jetStreamUnanswered(err) {
			return err
		}
		wait := delay
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("%w; gave up after %s (--connect-timeout)", err, timeout)
			}
			wait = min(wait, left) // a last attempt at the deadline
		}
		a.log.Warn().Err(err).Int("attempt", attempt).Str("next_delay", wait.Round(time.Millisecond).String()).
			Msg("JetStream does not answer (no leader or not enough peers yet?); retrying")
		select {
		case <-ctx.Done():
			return errStoppedConnecting
		case <-time.After(wait):
		}
		delay = min(2*delay, connectMaxDelay)
	}
}

// setupAttemptTimeout bounds one attempt of a set-up step (a few
// JetStream API requests).
const setupAttemptTimeout = 15 * time.Second

// jetStreamUnanswered reports whether err says JetStream did not answer
// in time, has no leader, or lacks the peers to place a stream: worth
// retrying. JetStream not enabled, a denied permission or a bad setting
// is not.
func jetStreamUnanswered(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse):
		return true
	case errors.As(err, &api):
		// 503: the JetStream system is temporarily unavailable (no
		// meta leader); no suitable peers for the replicas asked for.
		return api.Code == 503 || api.ErrorCode == jsErrCodeClusterNoPeers
	}
	return false
}

// jsErrCodeClusterNoPeers is the server's "no suitable peers for
// placement": fewer servers up than the replicas asked for.
const jsErrCodeClusterNoPeers jetstream.ErrorCode = 10005

// undo holds cleanups to run in reverse order, like defers registered by
// the functions that set things up.
type undo []func()

func (u *undo) add(f func()) { *u = append(*u, f) }

// run is a pointer method so that `defer u.run()` sees what is added later.
func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
}

// errStoppedConnecting is serveNATS's error when the shutdown signal came
// while the first connection to nats.url was retried.
var errStoppedConnecting = errors.New("stopped while connecting to NATS")

// serveNATS starts the embedded NATS server (without nats.url) or connects
// to nats.url, and the HTTP endpoints; cleanup gets what stops them.
func (a *app) serveNATS(ctx context.Context, cfg *config.Config, so serveOptions, h http.Handler, cleanup *undo) (*nats.Conn, error) {
	natsOpts := append(natsOptions(cfg.NATS), a.natsLogHandlers()...)
	if cfg.NATS.URL == "" {
		sopts, err := embeddedServerOptions(cfg.NATS)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		srv, err := natsserver.Start(ctx, sopts)
		var listen *natsserver.ListenError
		if errors.As(err, &listen) {
			// As for http.listen: the configuration must name another address.
			return nil, withCode(exitUsage, err)
		}
		if err != nil {
			return nil, err
		}
		cleanup.add(srv.Shutdown)
		a.log.Info().Str("url", srv.ClientURL()).Str("store", cfg.NATS.StoreDir).Msg("embedded NATS JetStream server started")
		stopHTTP, err := a.startHTTP(cfg.HTTP.Listen, h)
		if err != nil {
			return nil, err
		}
		cleanup.add(stopHTTP)
		if srv.ClientURL() != "" {
			removeAdvert, err := writeAdvert(cfg, srv)
			if err != nil {
				return nil, err
			}
			cleanup.add(removeAdvert)
		}
		return srv.Connect(natsOpts...)
	}

	// Up before NATS: /healthz answers and /readyz says "connecting"
	// while the first connection is retried.
	stopHTTP, err := a.startHTTP(cfg.HTTP.Listen, h)
	if err != nil {
		return nil, err
	}
	cleanup.add(stopHTTP)
	nc, err := a.connectNATS(ctx, cfg.NATS, time.Duration(so.connectTimeout), natsOpts)
	if err != nil && ctx.Err() != nil {
		return nil, errStoppedConnecting
	}
	return nc, err
}

// serveService is serve's publication service, fenced by both leases;
// setUp recreates the lease bucket when an acquisition finds it gone.
func (a *app) serveService(cfg *config.Config, js jetstream.JetStream, streams *events.Streams, m *metrics.Metrics, setUp func(context.Context) error) *service.Service {
	locker := &restoringLocker{Locker: serveLocker(js, streams, "serve", a.log), js: js, bucket: streams.Subjects.LeaseBucket(),
		setUp: setUp, recreated: m.Recreated, log: a.log}

	// Another process's publication on the same root is usually short:
	// wait for it rather than failing the delivery.
	svc := a.newService(cfg, a.log, locker, 15*time.Second)
	svc.LeaseWaited = m.LeaseWaited

	// Events queued for one root share its lease (within bounds).
	svc.HandOver = service.DefaultHandOver
	return svc
}

// restoringLocker recreates the lease bucket when an acquisition fails
// because it is gone (a NATS server restarted without its store), with
// the set-up serve runs at start, and acquires once more. One
// acquisition at a time looks the bucket up and recreates it; the others
// wait and find it back.
type restoringLocker struct {
	lease.Locker
	js        jetstream.JetStream
	bucket    string
	setUp     func(context.Context) error
	recreated func()
	log       zerolog.Logger

	mu sync.Mutex
	// failing: the last recreation failed; the incident was logged.
	failing bool
}

// Acquire implements lease.Locker.
func (l *restoringLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	ls, err := l.Locker.Acquire(ctx, root)
	if err == nil || !unanswered(err) || ctx.Err() != nil || !l.restore(ctx) {
		return ls, err
	}
	return l.Locker.Acquire(ctx, root)
}

// unanswered reports whether err says that no stream answered a write or
// a look-up of the bucket: the bucket may be gone.
func unanswered(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
}

// restore recreates the bucket when NATS says it does not exist, and
// reports whether it is there now (recreated here, or by another
// acquisition or process meanwhile).
func (l *restoringLocker) restore(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.js.KeyValue(ctx, l.bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return err == nil
	}
	if !l.failing {
		l.log.Warn().Str("missing", "key-value bucket "+l.bucket).
			Msgf("key-value bucket %s does not exist on NATS (a server restarted without its store, or it was deleted); recreating it", l.bucket)
	}
	if err := l.setUp(ctx); err != nil {
		if !l.failing {
			l.log.Warn().Err(err).Str("missing", "key-value bucket "+l.bucket).Msg("could not recreate the lease bucket; publications are retried")
		}
		l.failing = true
		return false
	}
	l.failing = false
	l.recreated()
	l.log.Info().Str("missing", "key-value bucket "+l.bucket).Msgf("recreated key-value bucket %s", l.bucket)
	return true
}

// runUntilStopped runs the consumer until ctx ends and in-flight work
// finishes.
func (a *app) runUntilStopped(ctx context.Context, c *consumer.Consumer, ready *readiness) error {
	// The shutdown signal ends ctx: say so, and stop being ready while
	// in-flight work finishes.
	stopped, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
		case <-stopped:
			if ctx.Err() == nil {
				return
			}
		}
		ready.drain()
		a.log.Info().Msg("shutdown signal received; finishing in-flight work")
	}()
	err := c.Run(ctx)
	close(stopped)
	<-watched
	a.log.Info().Msg("stopped")
	return err
}
