package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
)

// TestServeKeepsOperatorStreamSettings: serve creates missing streams and
// the durable with the configured settings (max age, max deliveries); when
// it starts again after an operator changed a setting on the server, the
// server keeps the operator's value and serve logs one warn line naming the
// setting, the server's value and the configured one.
func TestServeKeepsOperatorStreamSettings(t *testing.T) {
	t.Parallel()
	n := newNATSEnv(t)
	e := writeNATSConfig(t, "  url: "+n.url+"\n  event_max_age: 10d\n  max_deliveries: 7\n  redelivery_backoff: [250ms, 2s]\n")
	ctx := context.Background()
	js := n.nats.JetStream(t)

	s := startServe(t, e.cfg)
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.stderr.String())
	}
	ev, err := js.Stream(ctx, "DISTRIBUTOR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.CachedInfo().Config.MaxAge; got != 10*24*time.Hour {
		t.Fatalf("created events stream: max age %s, want the configured 240h", got)
	}
	cons, err := js.Consumer(ctx, "DISTRIBUTOR_BUNDLES", "distributor-publisher")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.MaxDeliver; got != 7 {
		t.Fatalf("created durable: max deliver %d, want the configured 7", got)
	}
	if strings.Contains(s.stderr.String(), `"level":"warn"`) {
		t.Errorf("first serve warned: %s", s.stderr.String())
	}

	// The operator: `nats stream edit DISTRIBUTOR_EVENTS --max-age 3d`.
	cfg := ev.CachedInfo().Config
	cfg.MaxAge = 3 * 24 * time.Hour
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, e.cfg)
	ev, err = js.Stream(ctx, "DISTRIBUTOR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.CachedInfo().Config.MaxAge; got != 3*24*time.Hour {
		t.Errorf("after serve started again: max age %s, want the operator's 72h", got)
	}
	var warns []string
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		var l struct{ Level, Message string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "warn" {
			warns = append(warns, l.Message)
		}
	}
	const want = "stream DISTRIBUTOR_EVENTS differs from the configuration: max_age is 3d on the server, 10d configured; keeping the server's values (an operator may have set them; docs/operations.md says how to apply the configuration)"
	if !slices.Equal(warns, []string{want}) {
		t.Errorf("warn lines %q, want [%s]", warns, want)
	}
}

// consumerOptions carries the redelivery settings, and a configured max
// age of 0 is no limit.
func TestConsumerOptionsFromConfig(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("nats: {max_deliveries: 3, redelivery_backoff: [100ms, 1m], replicas: 1, bundle_max_age: 0}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	o := consumerOptions(c, 6, zerolog.Nop())
	if o.MaxDeliver != 3 || !slices.Equal(o.BackOff, []time.Duration{100 * time.Millisecond, time.Minute}) || o.Workers != 6 || o.Replicas != 1 {
		t.Errorf("options %+v", o)
	}
	if got := maxAge(c.NATS.BundleMaxAge); got >= 0 {
		t.Errorf("max age 0 maps to %s, want events.NoMaxAge", got)
	}
	if got := maxAge(c.NATS.EventMaxAge); got != 30*24*time.Hour {
		t.Errorf("default event max age maps to %s", got)
	}
}
