package main

import (
	"context"
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
			return a.serve(cmd.Context(), cfg, consumer.Options{Workers: workers, Replicas: cfg.NATS.Replicas, Log: a.log})
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
		sopts, err := embeddedServerOptions(cfg.NATS)
		if err != nil {
			return withCode(exitUsage, err)
		}
		srv, err := natsserver.Start(ctx, sopts)
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
			return connectError(cfg.NATS, cfg.NATS.URL, err, false)
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
		// The KV lease fences serve processes; the lock object in the root
		// also excludes direct-mode runs on hosts without NATS.
		Locker: lease.Both(lease.NewKV(js, streams.Leases, holderName("serve"), serveLeaseTTL),
			lease.NewStorageLocker(holderName("serve"), serveLeaseTTL)),
		// Another process's publication on the same root is usually
		// short: wait for it rather than failing the delivery.
		LeaseWait: 15 * time.Second,
	}
	c := consumer.New(js, streams.Subjects, runner, opts)
	err = c.Run(ctx)
	a.log.Info().Msg("stopped")
	return err
}
