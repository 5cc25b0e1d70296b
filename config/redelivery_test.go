package config

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func durations(ds ...time.Duration) []Duration {
	out := make([]Duration, len(ds))
	for i, d := range ds {
		out[i] = Duration(d)
	}
	return out
}

// TestRedelivery: nats.max_deliveries (≥ 1, default 5) and
// nats.redelivery_backoff (a list of positive durations, default
// 1s,5s,15s,30s,1m) from the file; anything else is one line naming the key.
func TestRedelivery(t *testing.T) {
	def := durations(time.Second, 5*time.Second, 15*time.Second, 30*time.Second, time.Minute)
	tests := []struct {
		yaml    string
		max     int
		backoff []Duration
		err     string
	}{
		{yaml: "nats: {}\n", max: 5, backoff: def},
		{yaml: "nats: {max_deliveries: 1, redelivery_backoff: [2s, 1d]}\n", max: 1, backoff: durations(2*time.Second, 24*time.Hour)},
		{yaml: "nats:\n  redelivery_backoff:\n    - 90s\n", max: 5, backoff: durations(90 * time.Second)},
		{yaml: "nats: {max_deliveries: 0}\n", err: "config.yaml:1: nats.max_deliveries must be at least 1"},
		{yaml: "nats:\n  max_deliveries: -2\n", err: "config.yaml:2: nats.max_deliveries must be at least 1"},
		{yaml: "nats: {max_deliveries: often}\n", err: `config.yaml:1: nats.max_deliveries must be a whole number, got "often"`},
		{yaml: "nats:\n  redelivery_backoff: [1s, 0s]\n", err: `config.yaml:2: nats.redelivery_backoff[1] must be a positive duration such as "30s"`},
		{yaml: "nats:\n  redelivery_backoff:\n    - 1s\n    - soon\n", err: `config.yaml:4: nats.redelivery_backoff[1]: invalid duration "soon": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{yaml: "nats: {redelivery_backoff: 5s}\n", err: `config.yaml:1: nats.redelivery_backoff must be a list, got "5s"`},
		{yaml: "nats: {redelivery_backoff: [[1s]]}\n", err: `config.yaml:1: nats.redelivery_backoff[0] must be a duration such as "720h" or "30d", got a list`},
		{yaml: "nats: {max_delivery: 3}\n", err: `config.yaml:1: unknown key "max_delivery" in nats: did you mean "max_deliveries"?`},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.yaml), "config.yaml")
		if tt.err != "" {
			if err == nil || err.Error() != tt.err || !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: error %v, want %s", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.yaml, err)
			continue
		}
		if c.NATS.MaxDeliveries != tt.max || !reflect.DeepEqual(c.NATS.RedeliveryBackoff, tt.backoff) {
			t.Errorf("%q: max_deliveries %d, redelivery_backoff %v; want %d, %v", tt.yaml, c.NATS.MaxDeliveries, c.NATS.RedeliveryBackoff, tt.max, tt.backoff)
		}
	}
}

// TestRedeliveryEnv: the list is comma-separated in its variable, and each
// item is checked like in the file.
func TestRedeliveryEnv(t *testing.T) {
	c, err := Parse([]byte("nats: {redelivery_backoff: [1s]}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DISTRIBUTOR_NATS_REDELIVERY_BACKOFF": "2s, 1m,1d", "DISTRIBUTOR_NATS_MAX_DELIVERIES": "9"}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if want := durations(2*time.Second, time.Minute, 24*time.Hour); c.NATS.MaxDeliveries != 9 || !reflect.DeepEqual(c.NATS.RedeliveryBackoff, want) {
		t.Fatalf("max_deliveries %d, redelivery_backoff %v; want 9, %v", c.NATS.MaxDeliveries, c.NATS.RedeliveryBackoff, want)
	}
	before := *c
	for _, b := range []struct{ k, v, want string }{
		{"DISTRIBUTOR_NATS_REDELIVERY_BACKOFF", "1s,0s", `DISTRIBUTOR_NATS_REDELIVERY_BACKOFF: "0s": must be a positive duration such as "30s"`},
		{"DISTRIBUTOR_NATS_REDELIVERY_BACKOFF", "1s,,2s", `DISTRIBUTOR_NATS_REDELIVERY_BACKOFF: invalid duration "": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{"DISTRIBUTOR_NATS_MAX_DELIVERIES", "0", `DISTRIBUTOR_NATS_MAX_DELIVERIES: "0": must be at least 1`},
		{"DISTRIBUTOR_NATS_REPLICAS", "0", `DISTRIBUTOR_NATS_REPLICAS must be 1 to 5 (3 on a 3-node NATS cluster), got 0`},
	} {
		err := c.ApplyEnv(func(k string) (string, bool) { return b.v, k == b.k })
		if err == nil || err.Error() != b.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%q: err = %v, want %s", b.k, b.v, err, b.want)
		}
	}
	if !reflect.DeepEqual(*c, before) {
		t.Errorf("a refused variable changed the configuration")
	}
}

// TestDefaultConstants: the exported defaults are the ones Parse applies
// (the fields' default tags).
func TestDefaultConstants(t *testing.T) {
	c, err := Parse([]byte("destinations:\n  - {id: a, backend: local, path: /srv/a, transforms: [{name: markdown_to_html}]}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Destinations[0]
	got := []any{c.NATS.Listen, c.HTTP.Listen, c.NATS.StoreDir, c.NATS.SubjectPrefix, c.NATS.BundleMaxAge, c.NATS.EventMaxAge,
		c.NATS.Replicas, c.NATS.MaxDeliveries, d.Layout.Prefix, d.Publish.Include, d.Transforms[0].Match,
		c.PublicationTimeout, c.DestinationParallelism, c.MaxClockSkew}
	want := []any{DefaultListen, DefaultHTTPListen, DefaultStoreDir, DefaultSubjectPrefix, DefaultBundleMaxAge, DefaultEventMaxAge,
		DefaultReplicas, DefaultMaxDeliveries, DefaultLayoutPrefix, []string{DefaultInclude}, DefaultMarkdownMatch,
		DefaultPublicationTimeout, DefaultDestinationParallelism, DefaultMaxClockSkew}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults %v, want the constants %v", got, want)
	}
}
