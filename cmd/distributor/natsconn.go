package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// natsOptions turns the configuration's credentials and TLS into nats.go options.
func natsOptions(c config.NATS) []nats.Option {
	opts := []nats.Option{nats.Name("distributor " + version), nats.MaxReconnects(-1)}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeySeedFile != "" {
		// The option reads the seed file lazily, when connecting: a bad
		// file becomes the connect error, which names it.
		opts = append(opts, nkeyFromSeedFile(c.NKeySeedFile))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CA))
	}
	if c.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
	}
	return opts
}

// jetStream connects to NATS and makes sure the streams exist.
func (a *app) jetStream(ctx context.Context, cfg *config.Config) (*nats.Conn, jetstream.JetStream, *events.Streams, error) {
	url := cfg.NATS.ConnectURL()
	nc, err := nats.Connect(url, append(natsOptions(cfg.NATS), nats.Timeout(5*time.Second))...)
	if err != nil {
		hint := ""
		if cfg.NATS.URL == "" {
			hint = " (no nats.url is configured: start `distributor serve` first, or set nats.url)"
		}
		return nil, nil, nil, fmt.Errorf("connect to NATS at %s: %w%s", url, err, hint)
	}
	js, streams, err := setupStreams(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, streams, nil
}

func setupStreams(ctx context.Context, nc *nats.Conn, cfg *config.Config) (jetstream.JetStream, *events.Streams, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	subjects, err := events.NewSubjects(cfg.NATS.SubjectPrefix)
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	streams, err := events.Setup(ctx, js, events.SetupConfig{
		Subjects:      subjects,
		BundlesMaxAge: time.Duration(cfg.NATS.BundleMaxAge),
		EventsMaxAge:  time.Duration(cfg.NATS.EventMaxAge),
		Replicas:      cfg.NATS.Replicas,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("set up JetStream streams: %w", err)
	}
	return js, streams, nil
}

func holderName(role string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s on %s pid %d", role, version, host, os.Getpid())
}

func nkeyFromSeedFile(path string) nats.Option {
	return func(o *nats.Options) error {
		opt, err := nats.NkeyOptionFromSeed(path)
		if err != nil {
			return fmt.Errorf("nats.nkey_seed %s: %w", path, err)
		}
		return opt(o)
	}
}
