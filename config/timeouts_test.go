package config

import (
	"strings"
	"testing"
	"time"
)

func TestS3Timeouts(t *testing.T) {
	c, err := Parse([]byte(`
s3:
  endpoint: "http://127.0.0.1:9000"
  timeouts: {connect: 2s, idle: 1m, attempts: 5}
destinations:
  - {id: s, backend: s3, bucket: b}
  - id: own
    backend: s3
    bucket: b2
    timeouts: {connect: 1s, first_byte: 3s}
  - {id: l, backend: local, path: /srv/l}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	s := func(d time.Duration) Duration { return Duration(d) }
	want := map[string]S3Timeouts{
		"s":   {Connect: s(2 * time.Second), Idle: s(time.Minute), Attempts: 5},
		"own": {Connect: s(time.Second), FirstByte: s(3 * time.Second), Idle: s(time.Minute), Attempts: 5},
		"l":   {},
	}
	if got := c.S3.Timeouts; got != (S3Timeouts{Connect: s(2 * time.Second), Idle: s(time.Minute), Attempts: 5}) {
		t.Errorf("s3.timeouts = %+v", got)
	}
	for _, d := range c.Destinations {
		if d.Timeouts != want[d.ID] {
			t.Errorf("destination %s: timeouts = %+v, want %+v", d.ID, d.Timeouts, want[d.ID])
		}
	}
}

func TestS3TimeoutsErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"zero", "s3:\n  timeouts: {first_byte: 0s}\n", `config.yaml:2: s3.timeouts.first_byte must be a positive duration such as "30s"`},
		{"negative", "destinations:\n  - {id: a, backend: s3, bucket: r, timeouts: {idle: -5s}}\n", `config.yaml:2: destinations[0] (a): timeouts.idle must be a positive duration such as "30s"`},
		{"not a duration", "s3:\n  timeouts:\n    connect: soon\n", `config.yaml:3: s3.timeouts.connect: invalid duration "soon": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{"attempts", "s3:\n  timeouts: {attempts: 0}\n", `config.yaml:2: s3.timeouts.attempts must be at least 1 (1 = no retry)`},
		{"attempts type", "s3:\n  timeouts: {attempts: many}\n", `config.yaml:2: s3.timeouts.attempts must be a whole number, got "many"`},
		{"unknown", "s3:\n  timeouts: {read: 5s}\n", `config.yaml:2: unknown key "read" in s3.timeouts`},
		{"local", validDest + "    timeouts: {connect: 5s}\n", `config.yaml:5: destinations[0] (a): timeouts is only for s3 destinations: remove it or set backend: s3`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "config.yaml")
			if err == nil || err.Error() != tt.want || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}
