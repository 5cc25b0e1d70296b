package config

import (
	"testing"
)

// TestReplicas: nats.replicas defaults to 1, takes 1 to 5, and anything
// else is refused with one line naming the key and the range.
func TestReplicas(t *testing.T) {
	tests := []struct {
		yaml string
		want int
		err  string
	}{
		{yaml: "nats: {}\n", want: 1},
		{yaml: "nats: {replicas: 1}\n", want: 1},
		{yaml: "nats: {replicas: 3}\n", want: 3},
		{yaml: "nats: {replicas: 5}\n", want: 5},
		{yaml: "nats: {replicas: 0}\n", err: "config.yaml:1: nats.replicas must be 1 to 5 (3 on a 3-node NATS cluster), got 0"},
		{yaml: "nats:\n  replicas: 7\n", err: "config.yaml:2: nats.replicas must be 1 to 5 (3 on a 3-node NATS cluster), got 7"},
		{yaml: "nats: {replicas: -1}\n", err: "config.yaml:1: nats.replicas must be 1 to 5 (3 on a 3-node NATS cluster), got -1"},
		{yaml: "nats: {replicas: three}\n", err: `config.yaml:1: nats.replicas must be a whole number, got "three"`},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.yaml), "config.yaml")
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: error %v, want %s", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.yaml, err)
			continue
		}
		if c.NATS.Replicas != tt.want {
			t.Errorf("%q: Replicas = %d, want %d", tt.yaml, c.NATS.Replicas, tt.want)
		}
	}
}
