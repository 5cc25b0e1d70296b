package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/metrics"
)

// readyCheckTimeout bounds one /readyz probe of NATS and one refresh of
// the consumer's backlog for /metrics.
const readyCheckTimeout = 2 * time.Second

// consumerRefreshEvery is how often the consumer's backlog is asked from
// NATS for /metrics (a scrape reads the last answer).
const consumerRefreshEvery = 2 * time.Second

// readiness is what /readyz reports: connecting, ready while the NATS
// connection, both streams, the lease bucket and the durable consumer
// answer and nothing is being recreated, draining once the shutdown
// signal came.
type readiness struct {
	mu       sync.Mutex
	nc       *nats.Conn
	streams  *events.Streams
	draining bool

	// restoring says what serve is recreating ("" when nothing):
	// consumer.Consumer.Restoring.
	restoring func() string
}

func (r *readiness) connected(nc *nats.Conn, s *events.Streams, restoring func() string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nc, r.streams, r.restoring = nc, s, restoring
}

func (r *readiness) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining = true
}

// check returns "" when ready, else one line saying why not.
func (r *readiness) check(ctx context.Context) string {
	r.mu.Lock()
	nc, s, draining, restoring := r.nc, r.streams, r.draining, r.restoring
	r.mu.Unlock()
	switch {
	case draining:
		return "draining: shutting down, in-flight work is finishing"
	case nc == nil:
		return "connecting to NATS"
	case !nc.IsConnected():
		return "NATS connection is " + nc.Status().String()
	}
	if restoring != nil {
		if what := restoring(); what != "" {
			return what
		}
	}
	ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
	defer cancel()
	if _, err := s.Bundles.Info(ctx); err != nil {
		return fmt.Sprintf("stream %s unreachable: %v", s.Subjects.BundlesStream(), err)
	}
	if _, err := s.Events.Info(ctx); err != nil {
		return fmt.Sprintf("stream %s unreachable: %v", s.Subjects.EventsStream(), err)
	}
	if _, err := s.Leases.Status(ctx); err != nil {
		return fmt.Sprintf("key-value bucket %s unreachable: %v", s.Subjects.LeaseBucket(), err)
	}
	return consumable(ctx, s)
}

// consumable returns "" when the durable consumer exists and is not
// paused, else one line saying why not.
func consumable(ctx context.Context, s *events.Streams) string {
	name := fmt.Sprintf("consumer %s on stream %s", s.Subjects.Durable(), s.Subjects.BundlesStream())
	c, err := s.Bundles.Consumer(ctx, s.Subjects.Durable())
	if err != nil {
		return fmt.Sprintf("%s unreachable: %v", name, err)
	}
	if info := c.CachedInfo(); info.Paused {
		until := "resumed"
		if info.Config.PauseUntil != nil {
			until = info.Config.PauseUntil.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s is paused until %s", name, until)
	}
	return ""
}

// natsConnected reports whether serve's connection to NATS is up.
func (r *readiness) natsConnected() bool {
	r.mu.Lock()
	nc := r.nc
	r.mu.Unlock()
	return nc != nil && nc.IsConnected()
}

// consumerInfo reads the durable consumer's backlog for /metrics.
func (r *readiness) consumerInfo(ctx context.Context) (pending, ackPending uint64, err error) {
	r.mu.Lock()
	s := r.streams
	r.mu.Unlock()
	if s == nil {
		return 0, 0, errors.New("not connected")
	}
	c, err := s.Bundles.Consumer(ctx, s.Subjects.Durable())
	if err != nil {
		return 0, 0, err
	}
	info := c.CachedInfo()
	return info.NumPending, uint64(info.NumAckPending), nil
}

// observeHandler serves /healthz, /readyz, /metrics and, unless page is
// nil, the status page on / and /status.json. Other paths are 404.
func observeHandler(ready *readiness, m *metrics.Metrics, page *statusPage) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		if why := ready.check(req.Context()); why != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, why)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", m.Handler())
	if page != nil {
		mux.HandleFunc("GET /{$}", page.serveHTML)
		mux.HandleFunc("GET /status.json", page.serveJSON)
	}
	return mux
}

// startHTTP listens on addr (config.HTTPOff: not at all) and serves h until
// the returned stop is called.
func (a *app) startHTTP(addr string, h http.Handler) (stop func(), err error) {
	if addr == config.HTTPOff {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, usageErr("http.listen %s is in use: set http.listen or --http-addr to a free address, or %q", addr, config.HTTPOff)
		}
		return nil, withCode(exitUsage, fmt.Errorf("http.listen %s: %w", addr, err))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("http server stopped")
		}
	}()
	a.log.Info().Str("addr", l.Addr().String()).Msg("serving the status page, /healthz, /readyz and /metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// Back-off of the first NATS connection.
const (
	connectFirstDelay = 250 * time.Millisecond
	connectMaxDelay   = 10 * time.Second
)

// connectNATS makes serve's first connection to nats.url, retrying with
// back-off while the servers are not reachable, until ctx ends or timeout
// (0: none) passes. A server that refuses the credentials is not retried:
// waiting does not fix that. An explicit loop rather than
// nats.RetryOnFailedConnect: every attempt is logged with the next delay,
// the timeout is honoured, and nothing uses the connection before it is up.
func (a *app) connectNATS(ctx context.Context, c config.NATS, timeout time.Duration, opts []nats.Option) (*nats.Conn, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	delay := connectFirstDelay
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(c.URL, opts...)
		if err == nil {
			if attempt > 1 {
				a.log.Info().Str("url", nc.ConnectedUrlRedacted()).Int("attempt", attempt).Msg("connected to NATS")
			}
			return nc, nil
		}
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, connectError(c, c.URL, err)
		}
		wait := delay
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, fmt.Errorf("%w; gave up after %s (--connect-timeout)", connectError(c, c.URL, err), timeout)
			}
			wait = min(wait, left) // a last attempt at the deadline
		}
		a.log.Warn().Err(err).Str("url", config.RedactURL(c.URL)).Int("attempt", attempt).Str("next_delay", wait.Round(time.Millisecond).String()).
			Msg("NATS not reachable; retrying")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		delay = min(2*delay, connectMaxDelay)
	}
}

// natsLogHandlers log what happens to serve's connection after it is up.
func (a *app) natsLogHandlers() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // serve closed it
			}
			a.log.Warn().Err(err).Msg("disconnected from NATS; reconnecting")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			a.log.Warn().Str("url", nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			e := a.log.Warn().Err(err)
			if sub != nil {
				e = e.Str("subject", sub.Subject)
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				e.Msg("slow consumer: NATS dropped messages for this client")
				return
			}
			e.Msg("NATS error")
		}),
	}
}
