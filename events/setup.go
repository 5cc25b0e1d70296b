package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Defaults of SetupConfig.
const (
	DefaultBundlesMaxAge     = 7 * 24 * time.Hour
	DefaultEventsMaxAge      = 30 * 24 * time.Hour
	DefaultBundlesDuplicates = 2 * time.Minute
	DefaultEventsDuplicates  = time.Hour
	DefaultLeaseMarkerTTL    = time.Minute
)

// NoMaxAge as SetupConfig.BundlesMaxAge or EventsMaxAge keeps events without
// an age limit (0 takes the default).
const NoMaxAge time.Duration = -1

// SetupConfig configures the streams and the lease bucket. Zero fields take
// the defaults.
type SetupConfig struct {
	Subjects Subjects

	// BundlesMaxAge is how long bundle-ready events are kept (default 7
	// days; NoMaxAge: no limit).
	BundlesMaxAge time.Duration

	// EventsMaxAge is how long result events are kept (default 30 days;
	// NoMaxAge: no limit).
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

	// Log gets one warn line per existing resource whose settings differ
	// from these (the zero Logger: none).
	Log zerolog.Logger
}

// Streams are the JetStream resources distributor uses.
type Streams struct {
	Subjects Subjects
	Bundles  jetstream.Stream
	Events   jetstream.Stream
	Leases   jetstream.KeyValue

	// Differences are the settings found on the server that differ from
	// the configuration; the server's values were kept.
	Differences []Difference
}

// Difference is a setting of an existing stream, bucket or consumer whose
// value on the server is not the configured one.
type Difference struct {
	Resource   string // "stream DISTRIBUTOR_EVENTS"
	Setting    string // "max_age"
	Server     string
	Configured string
}

// Setup creates the streams and the lease bucket that are missing, with the
// configured settings. One that exists keeps its settings, which an operator
// may have changed on purpose: a difference is logged, not applied. Only
// what distributor cannot work without is added to an existing one: the
// subjects it must receive, per-key TTLs in the lease bucket. Every serve
// process and CLI command may call it.
func Setup(ctx context.Context, js jetstream.JetStream, cfg SetupConfig) (*Streams, error) {
	s := cfg.Subjects
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	st := &Streams{Subjects: s}
	var diffs []Difference
	var err error
	if st.Bundles, diffs, err = ensureStream(ctx, js, cfg.bundlesConfig(), cfg.Log); err != nil {
		return nil, fmt.Errorf("set up stream %s: %w", s.BundlesStream(), err)
	}
	st.Differences = append(st.Differences, diffs...)
	if st.Events, diffs, err = ensureStream(ctx, js, cfg.eventsConfig(), cfg.Log); err != nil {
		return nil, fmt.Errorf("set up stream %s: %w", s.EventsStream(), err)
	}
	st.Differences = append(st.Differences, diffs...)
	if st.Leases, diffs, err = ensureLeases(ctx, js, cfg); err != nil {
		return nil, fmt.Errorf("set up key-value bucket %s (needs NATS 2.11 or newer): %w", s.LeaseBucket(), err)
	}
	st.Differences = append(st.Differences, diffs...)
	return st, nil
}

func (c SetupConfig) bundlesConfig() jetstream.StreamConfig {
	s := c.Subjects
	return jetstream.StreamConfig{
		Name:        s.BundlesStream(),
		Description: "distributor bundle-ready events",
		Subjects:    []string{s.BundleReadyFilter(""), s.AdminBundleReadyFilter("")},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      c.BundlesMaxAge,
		Duplicates:  c.BundlesDuplicates,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	}
}

func (c SetupConfig) eventsConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Subjects.EventsStream(),
		Description: "distributor result events",
		Subjects:    []string{c.Subjects.prefix() + ".events.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      c.EventsMaxAge,
		Duplicates:  c.EventsDuplicates,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	}
}

// ensureStream creates the stream as want when it is missing; otherwise it
// adds only the subjects of want the stream lacks and reports the other
// differences.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, log zerolog.Logger) (jetstream.Stream, []Difference, error) {
	stream, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = js.CreateStream(ctx, want)
		if err == nil {
			return stream, nil, nil
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another process created it meanwhile, with its settings.
			stream, err = js.Stream(ctx, want.Name)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	have := stream.CachedInfo().Config
	if missing := MissingSubjects(have.Subjects, want.Subjects); len(missing) > 0 {
		upd := have
		upd.Subjects = append(slices.Clone(have.Subjects), missing...)
		if stream, err = js.UpdateStream(ctx, upd); err != nil {
			return nil, nil, fmt.Errorf("add the subjects distributor must receive (%s): %w", strings.Join(missing, ", "), err)
		}
		log.Warn().Str("stream", want.Name).Strs("added_subjects", missing).
			Msgf("stream %s lacked subjects distributor must receive; added %s (nothing else changed)", want.Name, strings.Join(missing, ", "))
	}
	diffs := StreamDifferences("stream "+want.Name, have, want)
	WarnDifferences(log, diffs)
	return stream, diffs, nil
}

// ensureLeases creates the lease bucket when it is missing; otherwise it
// turns on per-key TTLs if they are off (a lease without them never
// expires) and reports the other differences.
func ensureLeases(ctx context.Context, js jetstream.JetStream, cfg SetupConfig) (jetstream.KeyValue, []Difference, error) {
	bucket := cfg.Subjects.LeaseBucket()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         bucket,
			Description:    "distributor destination-root leases",
			History:        1,
			Storage:        cfg.Storage,
			Replicas:       cfg.Replicas,
			LimitMarkerTTL: cfg.LeaseMarkerTTL,
		})
		if err == nil {
			return kv, nil, nil
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	name := "KV_" + bucket // the bucket's stream
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	have := stream.CachedInfo().Config
	if !have.AllowMsgTTL || have.SubjectDeleteMarkerTTL == 0 {
		upd := have
		upd.AllowMsgTTL, upd.SubjectDeleteMarkerTTL = true, cfg.LeaseMarkerTTL
		if _, err := js.UpdateStream(ctx, upd); err != nil {
			return nil, nil, fmt.Errorf("turn on per-key TTLs, without which a lease never expires: %w", err)
		}
		cfg.Log.Warn().Str("bucket", bucket).Msgf("key-value bucket %s had no per-key TTLs, without which a lease never expires; turned them on (nothing else changed)", bucket)
	}
	want := jetstream.StreamConfig{Replicas: cfg.Replicas, Storage: cfg.Storage}
	diffs := leaseDifferences("key-value bucket "+bucket, have, want)
	WarnDifferences(cfg.Log, diffs)
	return kv, diffs, nil
}

// MissingSubjects lists the subjects of want that have lacks.
func MissingSubjects(have, want []string) []string {
	var missing []string
	for _, s := range want {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// StreamDifferences compares the settings of a stream an operator may tune.
func StreamDifferences(resource string, server, configured jetstream.StreamConfig) []Difference {
	d := leaseDifferences(resource, server, configured)
	add := func(setting, s, c string) {
		if s != c {
			d = append(d, Difference{Resource: resource, Setting: setting, Server: s, Configured: c})
		}
	}
	add("max_age", FormatAge(server.MaxAge), FormatAge(configured.MaxAge))
	add("discard", strings.ToLower(strings.TrimPrefix(server.Discard.String(), "Discard")),
		strings.ToLower(strings.TrimPrefix(configured.Discard.String(), "Discard")))
	add("duplicate_window", FormatDuration(server.Duplicates), FormatDuration(configured.Duplicates))
	return d
}

// leaseDifferences compares replicas and storage, the settings the lease
// bucket shares with the streams.
func leaseDifferences(resource string, server, configured jetstream.StreamConfig) []Difference {
	var d []Difference
	if s, c := max(server.Replicas, 1), max(configured.Replicas, 1); s != c {
		d = append(d, Difference{resource, "replicas", strconv.Itoa(s), strconv.Itoa(c)})
	}
	if s, c := strings.ToLower(server.Storage.String()), strings.ToLower(configured.Storage.String()); s != c {
		d = append(d, Difference{resource, "storage", s, c})
	}
	return d
}

// WarnDifferences logs one line for the differences of one resource.
func WarnDifferences(log zerolog.Logger, diffs []Difference) {
	if len(diffs) == 0 {
		return
	}
	parts := make([]string, len(diffs))
	settings := make([]string, len(diffs))
	for i, d := range diffs {
		parts[i] = fmt.Sprintf("%s is %s on the server, %s configured", d.Setting, d.Server, d.Configured)
		settings[i] = d.Setting
	}
	log.Warn().Str("resource", diffs[0].Resource).Strs("settings", settings).
		Msgf("%s differs from the configuration: %s; keeping the server's values (an operator may have set them; docs/operations.md says how to apply the configuration)",
			diffs[0].Resource, strings.Join(parts, "; "))
}

// FormatAge prints a max age; 0 is no limit.
func FormatAge(d time.Duration) string {
	if d <= 0 {
		return "unlimited"
	}
	return FormatDuration(d)
}

// FormatDuration prints whole days as "7d", anything else as Go does.
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
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
	for _, p := range []struct{ age, dup *time.Duration }{{&c.BundlesMaxAge, &c.BundlesDuplicates}, {&c.EventsMaxAge, &c.EventsDuplicates}} {
		if *p.age < 0 {
			*p.age = 0 // no limit
		} else {
			*p.dup = min(*p.dup, *p.age)
		}
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}
