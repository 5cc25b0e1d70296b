package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/natsserver"
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
		return nil, nil, nil, connectError(cfg.NATS, url, err, true)
	}
	js, streams, err := setupStreams(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, streams, nil
}

// connectError says where the connection failed, without the URL's
// credentials, and what to check; serveHint suggests starting `serve` when
// nothing listens on the embedded server's address.
func connectError(c config.NATS, url string, err error, serveHint bool) error {
	hint := ""
	switch {
	case errors.Is(err, nats.ErrAuthorization):
		hint = " (the server refused the credentials: check nats.token, nats.user/password, nats.nkey_seed or nats.creds)"
	case serveHint && c.URL == "" && errors.Is(err, nats.ErrNoServers):
		hint = " (no nats.url is configured: start `distributor serve` first, or set nats.url)"
	}
	return fmt.Errorf("connect to NATS at %s: %w%s", config.RedactURL(url), err, hint)
}

// embeddedServerOptions configures the embedded server to demand the
// credential its clients present (the same configuration), so one `serve`
// with nats.token just works and nobody else reaches the JetStream API.
func embeddedServerOptions(c config.NATS) (natsserver.Options, error) {
	o := natsserver.Options{
		Listen: c.Listen, StoreDir: c.StoreDir,
		Token: c.Token, User: c.User, Password: c.Password,
		TLS: natsserver.TLS{Cert: c.ServerTLS.Cert, Key: c.ServerTLS.Key, ClientCA: c.ServerTLS.ClientCA},
	}
	if c.Replicas > 1 {
		return o, fmt.Errorf("nats.replicas is %d but no nats.url is set: replicas need a NATS cluster (2.11 or newer); set nats.url to it, or nats.replicas to 1 for the embedded server", c.Replicas)
	}
	if c.CredsFile != "" {
		// Checking JWTs needs an operator, accounts and a resolver: that
		// is a real NATS deployment's job.
		return o, errors.New("nats.creds needs an external NATS server: set nats.url, or use nats.token, nats.user/password or nats.nkey_seed with the embedded server")
	}
	if c.NKeySeedFile != "" {
		data, err := os.ReadFile(c.NKeySeedFile)
		if err != nil {
			return o, fmt.Errorf("nats.nkey_seed: %w", err)
		}
		kp, err := nkeys.ParseDecoratedUserNKey(data)
		if err != nil {
			return o, fmt.Errorf("nats.nkey_seed %s: %w: the file must hold a user seed (SU…), as `nk -gen user` writes", c.NKeySeedFile, err)
		}
		defer kp.Wipe()
		if o.NKey, err = kp.PublicKey(); err != nil {
			return o, fmt.Errorf("nats.nkey_seed %s: %w", c.NKeySeedFile, err)
		}
	}
	return o, nil
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
