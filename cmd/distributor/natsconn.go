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
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
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

// errNoNATS: no nats.url is set and no running `serve` of this
// configuration advertises its embedded server.
var errNoNATS = errors.New("no NATS known")

// connectKnownNATS connects to nats.url (it must answer) or, without it, to
// the embedded server a running `serve` of this configuration advertises
// (see advertFile). It never dials nats.listen blindly: whatever else
// listens there is a stranger's. Without either it returns errNoNATS.
func (a *app) connectKnownNATS(cfg *config.Config) (*nats.Conn, error) {
	url := cfg.NATS.URL
	var ad *advert
	if url == "" {
		found, err := findAdvert(cfg)
		if err != nil {
			a.log.Debug().Err(err).Msg("no serve of this configuration advertises NATS")
			return nil, errNoNATS
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
			a.log.Debug().Err(err).Str("url", url).Msg("the NATS server serve advertises is gone (serve is stopping)")
			return nil, errNoNATS
		}
		return nil, connectError(cfg.NATS, url, err)
	}
	if ad != nil && (nc.ConnectedServerId() != ad.ServerID || nc.ConnectedServerName() != ad.ServerName) {
		// A stale advertisement: another server took the address.
		nc.Close()
		a.log.Debug().Str("url", url).Msg("the NATS server there is not the one serve advertised")
		return nil, errNoNATS
	}
	return nc, nil
}

// jetStream connects to the known NATS (connectKnownNATS) and makes sure the
// streams exist; "to what" completes the error line when there is none
// ("publish to").
func (a *app) jetStream(ctx context.Context, cfg *config.Config, toWhat string) (*nats.Conn, jetstream.JetStream, *events.Streams, error) {
	nc, err := a.connectKnownNATS(cfg)
	if errors.Is(err, errNoNATS) {
		return nil, nil, nil, fmt.Errorf("no NATS to %s: set nats.url or start `distributor serve`", toWhat)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	js, streams, err := setupStreams(ctx, nc, cfg, zerolog.Nop())
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, streams, nil
}

// connectError says where the connection failed, without the URL's
// credentials, and what to check.
func connectError(c config.NATS, url string, err error) error {
	hint := ""
	if errors.Is(err, nats.ErrAuthorization) {
		hint = " (the server refused the credentials: check nats.token, nats.user/password, nats.nkey_seed or nats.creds)"
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

// setupStreams makes sure the streams and the lease bucket exist; log gets
// the differences between existing ones and the configuration (serve warns
// about them at start, other commands need not repeat it).
func setupStreams(ctx context.Context, nc *nats.Conn, cfg *config.Config, log zerolog.Logger) (jetstream.JetStream, *events.Streams, error) {
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
		BundlesMaxAge: maxAge(cfg.NATS.BundleMaxAge),
		EventsMaxAge:  maxAge(cfg.NATS.EventMaxAge),
		Replicas:      cfg.NATS.Replicas,
		Log:           log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("set up JetStream streams: %w", err)
	}
	return js, streams, nil
}

// maxAge maps a configured max age to events.SetupConfig's: the
// configuration's 0 is no limit.
func maxAge(d config.Duration) time.Duration {
	if d == 0 {
		return events.NoMaxAge
	}
	return time.Duration(d)
}

// consumerOptions are serve's consumer options from the configuration.
func consumerOptions(cfg *config.Config, workers int, log zerolog.Logger) consumer.Options {
	backoff := make([]time.Duration, len(cfg.NATS.RedeliveryBackoff))
	for i, d := range cfg.NATS.RedeliveryBackoff {
		backoff[i] = time.Duration(d)
	}
	return consumer.Options{Workers: workers, Replicas: cfg.NATS.Replicas, MaxDeliver: cfg.NATS.MaxDeliveries, BackOff: backoff, Log: log}
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
