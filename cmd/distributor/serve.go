package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/stores"
)

// serveLeaseTTL is how long a crashed serve process blocks a root; leases are
// renewed every third of it while work runs.
const serveLeaseTTL = 30 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var natsURL string
	var workers int
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
			return a.serve(cmd.Context(), cfg, consumer.Options{Workers: workers, Log: a.log})
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", "", "NATS server URL (default: nats.url, else an embedded server)")
	cmd.Flags().IntVar(&workers, "workers", 4, "bundle events processed at once")
	return cmd
}

// serve runs the consumer until ctx ends (SIGINT/SIGTERM).
func (a *app) serve(ctx context.Context, cfg *config.Config, opts consumer.Options) error {
	var nc *nats.Conn
	if cfg.NATS.URL == "" {
		srv, err := natsserver.Start(ctx, natsserver.Options{Listen: cfg.NATS.Listen, StoreDir: cfg.NATS.StoreDir})
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		a.log.Info().Str("url", srv.ClientURL()).Str("store", cfg.NATS.StoreDir).Msg("embedded NATS JetStream server started")
		if nc, err = srv.Connect(natsOptions(cfg.NATS)...); err != nil {
			return err
		}
	} else {
		var err error
		if nc, err = nats.Connect(cfg.NATS.URL, natsOptions(cfg.NATS)...); err != nil {
			return fmt.Errorf("connect to NATS at %s: %w", cfg.NATS.URL, err)
		}
	}
	defer nc.Close()
	js, streams, err := setupStreams(ctx, nc, cfg)
	if err != nil {
		return err
	}
	runner := &engine.Runner{
		Engine: &engine.Engine{Version: version, Log: a.log},
		Config: cfg,
		Stores: stores.New(cfg),
		Locker: lease.NewKV(js, streams.Leases, holderName("serve"), serveLeaseTTL),
		// Another process's publication on the same root is usually
		// short: wait for it rather than failing the delivery.
		LeaseWait: 15 * time.Second,
	}
	c := consumer.New(js, streams.Subjects, runner, opts)
	err = c.Run(ctx)
	a.log.Info().Msg("stopped")
	return err
}

// waitingLocker waits for a held root instead of failing at once. Without it
// two events touching one root make the consumer nak and back off (1 s, 5 s,
// 15 s, …), and a busy root exhausts MaxDeliver. Workers of this process
// queue on a local slot per root; other processes' leases are polled until
// maxWait, after which ErrHeld goes to the consumer as before (a retry).
type waitingLocker struct {
	inner   lease.Locker
	maxWait time.Duration

	mu    sync.Mutex
	slots map[string]chan struct{}
}

func newWaitingLocker(inner lease.Locker, maxWait time.Duration) *waitingLocker {
	return &waitingLocker{inner: inner, maxWait: maxWait, slots: map[string]chan struct{}{}}
}

func (w *waitingLocker) slot(key string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.slots[key]
	if !ok {
		s = make(chan struct{}, 1)
		w.slots[key] = s
	}
	return s
}

// Acquire implements lease.Locker.
func (w *waitingLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	wait := time.NewTimer(w.maxWait)
	defer wait.Stop()
	slot := w.slot(root.Key)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-wait.C:
		return nil, fmt.Errorf("%w: %s: this process's other publications held it for over %s", lease.ErrHeld, root.Key, w.maxWait)
	}
	delay := 20 * time.Millisecond
	for {
		// ctx, not a shorter one: the lease renews itself until ctx ends.
		l, err := w.inner.Acquire(ctx, root)
		if err == nil {
			return &slotLease{Lease: l, slot: slot}, nil
		}
		if !errors.Is(err, lease.ErrHeld) {
			<-slot
			return nil, err
		}
		// Jitter keeps competing processes from polling in step.
		select {
		case <-time.After(delay/2 + rand.N(delay)):
		case <-ctx.Done():
			<-slot
			return nil, ctx.Err()
		case <-wait.C:
			<-slot
			return nil, err
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// slotLease frees the process-local slot when the lease is released.
type slotLease struct {
	lease.Lease
	slot chan struct{}
	once sync.Once
}

func (l *slotLease) Release(ctx context.Context) error {
	err := l.Lease.Release(ctx)
	l.once.Do(func() { <-l.slot })
	return err
}
