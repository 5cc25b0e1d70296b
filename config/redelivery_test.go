package config

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func durs(ds ...time.Duration) []Duration {
	out := make([]Duration, len(ds))
	for i, d := range ds {
		out[i] = Duration(d)
	}
	return out
}

// TestRedeliverySettings: nats.max_deliveries defaults to 5 and takes 1 or
// more; nats.redelivery_backoff defaults to 1s, 5s, 15s, 30s, 1m and takes a
// non-empty list of positive durations in every duration form. Anything
// else is one line naming the key and the fix.
func TestRedeliverySettings(t *testing.T) {
	def := durs(time.Second, 5*time.Second, 15*time.Second, 30*time.Second, time.Minute)
	tests := []struct {
		yaml    string
		max     int
		backoff []Duration
		err     string
	}{
		{yaml: "nats: {}\n", max: 5, backoff: def},
		{yaml: "nats: {max_deliveries: 1}\n", max: 1, backoff: def},
		{yaml: "nats: {max_deliveries: 12, redelivery_backoff: [250ms, 2m, 1d]}\n", max: 12, backoff: durs(250*time.Millisecond, 2*time.Minute, 24*time.Hour)},
		{yaml: "nats: {max_deliveries: 2, redelivery_backoff: [1s, 2s, 3s, 4s]}\n", max: 2, backoff: durs(time.Second, 2*time.Second, 3*time.Second, 4*time.Second)},
		{yaml: "nats: {max_deliveries: 0}\n", err: "c.yaml:1: nats.max_deliveries must be at least 1 (1 = no redelivery), got 0"},
		{yaml: "nats:\n  max_deliveries: -3\n", err: "c.yaml:2: nats.max_deliveries must be at least 1 (1 = no redelivery), got -3"},
		{yaml: "nats: {max_deliveries: many}\n", err: `c.yaml:1: nats.max_deliveries must be a whole number, got "many"`},
		{yaml: "nats: {redelivery_backoff: []}\n", err: "c.yaml:1: nats.redelivery_backoff is empty: list at least one delay, e.g. [1s, 5s, 15s, 30s, 1m]"},
		{yaml: "nats: {redelivery_backoff: [1s, 0s]}\n", err: `c.yaml:1: nats.redelivery_backoff [1] is 0s: each delay must be a positive duration such as "30s"`},
		{yaml: "nats: {redelivery_backoff: [1s, -5s]}\n", err: `c.yaml:1: nats.redelivery_backoff [1] is -5s: each delay must be a positive duration such as "30s"`},
		{yaml: "nats: {redelivery_backoff: 5s}\n", err: `c.yaml:1: nats.redelivery_backoff must be a list, got "5s"`},
		{yaml: "nats:\n  redelivery_backoff:\n    - 1s\n    - soon\n", err: `c.yaml:4: nats.redelivery_backoff[1]: invalid duration "soon": use a Go duration like "90m" or "720h", or whole days like "30d"`},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.yaml), "c.yaml")
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
		if c.NATS.MaxDeliveries != tt.max || !slices.Equal(c.NATS.RedeliveryBackoff, tt.backoff) {
			t.Errorf("%q: max_deliveries %d backoff %v, want %d %v", tt.yaml, c.NATS.MaxDeliveries, c.NATS.RedeliveryBackoff, tt.max, tt.backoff)
		}
	}
}

// TestRedeliveryFromEnv: DISTRIBUTOR_NATS_REDELIVERY_BACKOFF is a
// comma-separated list; bad lists name the variable.
func TestRedeliveryFromEnv(t *testing.T) {
	tests := []struct {
		max, backoff string
		wantMax      int
		want         []Duration
		err          string
	}{
		{max: "9", backoff: "500ms, 2s,1d", wantMax: 9, want: durs(500*time.Millisecond, 2*time.Second, 24*time.Hour)},
		{backoff: "3s", wantMax: 5, want: durs(3 * time.Second)},
		{max: "0", err: `DISTRIBUTOR_NATS_MAX_DELIVERIES: "0": must be at least 1`},
		{backoff: "1s,,2s", err: `DISTRIBUTOR_NATS_REDELIVERY_BACKOFF: invalid duration "": use a Go duration like "90m" or "720h", or whole days like "30d" (a list is comma-separated, e.g. "1s,5s,1m")`},
		{backoff: "1s 2s", err: `DISTRIBUTOR_NATS_REDELIVERY_BACKOFF: invalid duration "1s 2s": use a Go duration like "90m" or "720h", or whole days like "30d" (a list is comma-separated, e.g. "1s,5s,1m")`},
		{backoff: "1s,0s", err: `DISTRIBUTOR_NATS_REDELIVERY_BACKOFF: "0s": each delay must be a positive duration such as "30s"`},
	}
	for _, tt := range tests {
		c, err := Parse([]byte("nats: {}\n"), "")
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"DISTRIBUTOR_NATS_MAX_DELIVERIES": tt.max, "DISTRIBUTOR_NATS_REDELIVERY_BACKOFF": tt.backoff}
		err = c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q %q: error %v, want %s", tt.max, tt.backoff, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %q: %v", tt.max, tt.backoff, err)
			continue
		}
		if c.NATS.MaxDeliveries != tt.wantMax || !slices.Equal(c.NATS.RedeliveryBackoff, tt.want) {
			t.Errorf("%q %q: %d %v, want %d %v", tt.max, tt.backoff, c.NATS.MaxDeliveries, c.NATS.RedeliveryBackoff, tt.wantMax, tt.want)
		}
	}
}
