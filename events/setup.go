package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of SetupConfig.
const (
	DefaultBundlesMaxAge     = 7 * 24 * time.Hour
	DefaultEventsMaxAge      = 30 * 24 * time.Hour
	DefaultBundlesDuplicates = 2 * time.Minute
	DefaultEventsDuplicates  = time.Hour
	DefaultLeaseMarkerTTL    = time.Minute
)

// SetupConfig configures the streams and the lease bucket. Zero fields take
// the defaults.
type SetupConfig struct {
	Subjects Subjects
	// BundlesMaxAge is how long bundle-ready events are kept (default 7 days).
	BundlesMaxAge time.Duration
	// EventsMaxAge is how long result events are kept (default 30 days).
	EventsMaxAge time.Duration
	// BundlesDuplicates is the dedup window on Nats-Msg-Id = event id
	// (default 2 minutes): a producer's retried announce is stored once.
	BundlesDuplicates time.Duration
	// EventsDuplicates is the dedup window of result events (default 1 hour):
	// it must outlast redeliveries of a bundle so that a publication
	// reports its result once.
	EventsDuplicates time.Duration
	// LeaseMarkerTTL is how long the lease bucket keeps the marker of an
	// expired key (default 1 minute). Setting it is what enables per-key TTLs.
	LeaseMarkerTTL time.Duration
	// Storage defaults to file storage (the zero value).
	Storage jetstream.StorageType
	// Replicas defaults to 1.
	Replicas int
}

// Streams are the JetStream resources distributor uses.
type Streams struct {
	Subjects Subjects
	Bundles  jetstream.Stream
	Events   jetstream.Stream
	Leases   jetstream.KeyValue
}

// Setup creates or updates both streams and the lease bucket. It is
// idempotent: every serve process and CLI command may call it.
func Setup(ctx context.Context, js jetstream.JetStream, cfg SetupConfig) (*Streams, error) {
	s := cfg.Subjects
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	bundles, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.BundlesStream(),
		Description: "distributor bundle-ready events",
		Subjects:    []string{s.BundleReadyFilter(""), s.AdminBundleReadyFilter("")},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.BundlesMaxAge,
		Duplicates:  cfg.BundlesDuplicates,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("set up stream %s: %w", s.BundlesStream(), err)
	}
	evs, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.EventsStream(),
		Description: "distributor result events",
		Subjects:    []string{s.prefix() + ".events.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.EventsMaxAge,
		Duplicates:  cfg.EventsDuplicates,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("set up stream %s: %w", s.EventsStream(), err)
	}
	leases, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         s.LeaseBucket(),
		Description:    "distributor destination-root leases",
		History:        1,
		Storage:        cfg.Storage,
		Replicas:       cfg.Replicas,
		LimitMarkerTTL: cfg.LeaseMarkerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("set up key-value bucket %s (needs NATS 2.11 or newer): %w", s.LeaseBucket(), err)
	}
	return &Streams{Subjects: s, Bundles: bundles, Events: evs, Leases: leases}, nil
}

func (c SetupConfig) withDefaults() SetupConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.BundlesMaxAge, DefaultBundlesMaxAge)
	def(&c.EventsMaxAge, DefaultEventsMaxAge)
	def(&c.BundlesDuplicates, DefaultBundlesDuplicates)
	def(&c.EventsDuplicates, DefaultEventsDuplicates)
	def(&c.LeaseMarkerTTL, DefaultLeaseMarkerTTL)
	// The server rejects a dedup window longer than the max age.
	c.BundlesDuplicates = min(c.BundlesDuplicates, c.BundlesMaxAge)
	c.EventsDuplicates = min(c.EventsDuplicates, c.EventsMaxAge)
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}
