package main

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/stores"
)

// The preambles the commands share: what a command needs before its own
// work, with the same checks and messages everywhere.

// loadRequest is the preamble of plan, apply and publish: the flags make a
// request and the configuration is loaded.
func (a *app) loadRequest(f *publishFlags) (service.Request, *config.Config, error) {
	req, err := f.request()
	if err != nil {
		return service.Request{}, nil, err
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return service.Request{}, nil, err
	}
	return req, cfg, nil
}

// loadDestination is the preamble of a command about one destination:
// --destination given, the configuration loaded, the destination in it.
func (a *app) loadDestination(id string) (*config.Config, config.Destination, error) {
	if err := requireFlag("destination", id); err != nil {
		return nil, config.Destination{}, err
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, config.Destination{}, err
	}
	d, err := destination(cfg, id)
	if err != nil {
		return nil, config.Destination{}, err
	}
	return cfg, d, nil
}

// destination looks a destination up, as a usage error when unknown.
func destination(cfg *config.Config, id string) (config.Destination, error) {
	d, ok := cfg.Destination(id)
	if !ok {
		return d, usageErr("unknown destination %q: it is not in the configuration (%s)", id, cfg.KnownDestinations())
	}
	return d, nil
}

// openDestination is loadDestination with the destination's root opened
// for reading only: no lease, no lock object, no recovery, so that it
// works on a read-only or full root.
func (a *app) openDestination(ctx context.Context, id string) (storage.Backend, error) {
	cfg, d, err := a.loadDestination(id)
	if err != nil {
		return nil, err
	}
	return stores.New(cfg).Destination(ctx, d)
}

// streamsConn is a NATS connection with distributor's streams set up.
type streamsConn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	streams *events.Streams
}

func (c *streamsConn) close() { c.nc.Close() }

// connectStreams is the preamble of the commands that read or announce
// events: the configuration loaded, NATS connected, the streams there.
func (a *app) connectStreams(ctx context.Context, toWhat string) (*config.Config, *streamsConn, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	nc, js, streams, err := a.jetStream(ctx, cfg, toWhat)
	if err != nil {
		return nil, nil, err
	}
	return cfg, &streamsConn{nc: nc, js: js, streams: streams}, nil
}
