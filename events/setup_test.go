package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// warnLines decodes the JSON log lines at warn level.
func warnLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "warn" {
			out = append(out, m)
		}
	}
	return out
}

// Rule: starting again never resets a setting an operator changed on the
// server: Setup keeps the server's value and logs one warn line per stream
// naming the setting, the server's value and the configured one.
func TestSetupKeepsOperatorChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	cfg := events.SetupConfig{}
	if _, err := events.Setup(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	// The operator: `nats stream edit DISTRIBUTOR_EVENTS --max-age 48h
	// --dupe-window 10m`, and a message limit distributor does not manage.
	edit := func(name string, change func(*jetstream.StreamConfig)) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		change(&c)
		if _, err := js.UpdateStream(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	edit("DISTRIBUTOR_EVENTS", func(c *jetstream.StreamConfig) { c.MaxAge, c.Duplicates = 48*time.Hour, 10*time.Minute })
	edit("DISTRIBUTOR_BUNDLES", func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 })

	var buf bytes.Buffer
	cfg.Log = zerolog.New(&buf)
	st, err := events.Setup(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := st.Events.Info(ctx)
	b, _ := st.Bundles.Info(ctx)
	if e.Config.MaxAge != 48*time.Hour || e.Config.Duplicates != 10*time.Minute || b.Config.MaxMsgs != 1000 || b.Config.MaxAge != events.DefaultBundlesMaxAge {
		t.Fatalf("after Setup: events max age %s dupe window %s, bundles max msgs %d max age %s; want the operator's 48h, 10m, 1000 and the untouched 7d",
			e.Config.MaxAge, e.Config.Duplicates, b.Config.MaxMsgs, b.Config.MaxAge)
	}
	want := []events.Difference{
		{Resource: "stream DISTRIBUTOR_EVENTS", Setting: "max_age", Server: "2d", Configured: "30d"},
		{Resource: "stream DISTRIBUTOR_EVENTS", Setting: "duplicate_window", Server: "10m0s", Configured: "1h0m0s"},
	}
	if !reflect.DeepEqual(st.Differences, want) {
		t.Errorf("differences %+v, want %+v", st.Differences, want)
	}
	warns := warnLines(t, &buf)
	const msg = "stream DISTRIBUTOR_EVENTS differs from the configuration: max_age is 2d on the server, 30d configured; duplicate_window is 10m0s on the server, 1h0m0s configured; keeping the server's values (an operator may have set them; docs/operations.md says how to apply the configuration)"
	if len(warns) != 1 || warns[0]["message"] != msg || warns[0]["resource"] != "stream DISTRIBUTOR_EVENTS" {
		t.Errorf("warn lines %v, want one: %s", warns, msg)
	}
}

// Rule: a missing stream is created with the configured settings, and a
// max age of NoMaxAge (the configuration's 0) means no limit.
func TestSetupCreatesMissingWithConfiguredSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	if _, err := events.Setup(ctx, js, events.SetupConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "DISTRIBUTOR_EVENTS"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := events.Setup(ctx, js, events.SetupConfig{EventsMaxAge: 36 * time.Hour, BundlesMaxAge: events.NoMaxAge, Log: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := st.Events.Info(ctx)
	if e.Config.MaxAge != 36*time.Hour || e.Config.Duplicates != time.Hour {
		t.Errorf("recreated events stream: max age %s duplicates %s, want 36h and 1h", e.Config.MaxAge, e.Config.Duplicates)
	}
	// The bundles stream existed with 7d: kept, and reported.
	want := []events.Difference{{Resource: "stream DISTRIBUTOR_BUNDLES", Setting: "max_age", Server: "7d", Configured: "unlimited"}}
	if !reflect.DeepEqual(st.Differences, want) {
		t.Errorf("differences %+v, want %+v", st.Differences, want)
	}

	fresh := testenv.NewNATS(t).JetStream(t)
	st, err = events.Setup(ctx, fresh, events.SetupConfig{BundlesMaxAge: events.NoMaxAge})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := st.Bundles.Info(ctx); b.Config.MaxAge != 0 || b.Config.Duplicates != events.DefaultBundlesDuplicates {
		t.Errorf("bundles stream without an age limit: max age %s duplicates %s, want 0 and 2m", b.Config.MaxAge, b.Config.Duplicates)
	}
}

// Rule: a lease bucket without per-key TTLs (a lease in it would never
// expire) gets them turned on, and nothing else changed; one warn line says so.
func TestSetupTurnsOnLeaseTTLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "DISTRIBUTOR_LEASES", History: 1, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := events.Setup(ctx, js, events.SetupConfig{Log: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Leases.Create(ctx, "k", []byte("v"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatalf("create with per-key TTL: %v", err)
	}
	s, err := js.Stream(ctx, "KV_DISTRIBUTOR_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != time.Minute || c.MaxBytes != 1<<20 {
		t.Errorf("bucket stream: allow TTL %v marker %s max bytes %d, want true, 1m and the operator's 1 MiB", c.AllowMsgTTL, c.SubjectDeleteMarkerTTL, c.MaxBytes)
	}
	warns := warnLines(t, &buf)
	if len(warns) != 1 || !strings.HasPrefix(warns[0]["message"].(string), "key-value bucket DISTRIBUTOR_LEASES had no per-key TTLs") {
		t.Errorf("warn lines %v", warns)
	}
}

// StreamDifferences compares exactly the tuned settings.
func TestStreamDifferences(t *testing.T) {
	t.Parallel()
	base := jetstream.StreamConfig{MaxAge: 7 * 24 * time.Hour, Duplicates: 2 * time.Minute, Replicas: 1, Storage: jetstream.FileStorage, Discard: jetstream.DiscardOld}
	tests := []struct {
		name   string
		change func(*jetstream.StreamConfig)
		want   []string
	}{
		{"same", func(*jetstream.StreamConfig) {}, nil},
		{"unmanaged settings", func(c *jetstream.StreamConfig) { c.MaxMsgs, c.MaxBytes, c.Description = 5, 1<<30, "x" }, nil},
		{"replicas 0 is 1", func(c *jetstream.StreamConfig) { c.Replicas = 0 }, nil},
		{"max age", func(c *jetstream.StreamConfig) { c.MaxAge = 90 * time.Minute }, []string{"max_age 1h30m0s 7d"}},
		{"no age limit", func(c *jetstream.StreamConfig) { c.MaxAge = 0 }, []string{"max_age unlimited 7d"}},
		{"replicas", func(c *jetstream.StreamConfig) { c.Replicas = 3 }, []string{"replicas 3 1"}},
		{"storage", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, []string{"storage memory file"}},
		{"discard", func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardNew }, []string{"discard new old"}},
		{"dupe window", func(c *jetstream.StreamConfig) { c.Duplicates = time.Hour }, []string{"duplicate_window 1h0m0s 2m0s"}},
	}
	for _, tt := range tests {
		server := base
		tt.change(&server)
		var got []string
		for _, d := range events.StreamDifferences("stream S", server, base) {
			if d.Resource != "stream S" {
				t.Errorf("%s: resource %q", tt.name, d.Resource)
			}
			got = append(got, d.Setting+" "+d.Server+" "+d.Configured)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
