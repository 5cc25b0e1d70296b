package jsonfast_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/distributor/distributor/internal/jsonfast"
)

// AppendString writes what encoding/json writes, with HTML escaping
// (json.Marshal) and without (an Encoder with SetEscapeHTML(false)), and
// StringLen measures it: strings of escaped characters, HTML ones,
// U+2028, invalid UTF-8, plain runs longer than a word.
func TestAppendStringIsEncodingJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	parts := []string{"a", "plain/run.txt", "é", "<", ">", "&", "\"", "\\", "\u2028", "\u2029", "\x00", "\x1f", "\x7f",
		"\b", "\f", "\n", "\r", "\t", "日本", "\xff", "\xc3", "\xe2\x80", "\U0001F600", " ", "\ufffd"}
	for round := range 5000 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
		s := sb.String()
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			w := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
			if got := jsonfast.AppendString([]byte("x"), s, html); !bytes.Equal(got[1:], w) || got[0] != 'x' {
				t.Fatalf("round %d, html %v: %q appends %s, want %s", round, html, s, got, w)
			}
			if n := jsonfast.StringLen(s, html); n != len(w) {
				t.Fatalf("round %d, html %v: %q measures %d, encodes as %d", round, html, s, n, len(w))
			}
		}
	}
}
