package config

import (
	"strings"
	"testing"
)

// FuzzParse: no configuration text panics the parser, and every error is a
// single line (what the CLI prints).
func FuzzParse(f *testing.F) {
	f.Add("pipelines:\n  - id: p.x\n    destinations: [d]\ndestinations:\n  - id: d\n    backend: local\n    path: /srv/x\n")
	f.Add("destinations:\n  - id: d\n    backend: s3\n    bucket: b\n    state: {mode: x}\n")
	f.Add("nats: {url: nats://x:1, listen: ':0'}\n")
	f.Add("a: &a [*a]\n")
	f.Fuzz(func(t *testing.T, text string) {
		_, err := Parse([]byte(text), "fuzz.yaml")
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("multi-line error: %q", err.Error())
		}
	})
}
