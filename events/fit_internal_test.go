package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// encodedOutputs keeps exactly the outputs the probes of largestFit keep,
// byte for byte: random outputs (characters JSON escapes, HTML ones,
// non-ASCII, sizes that are and are not written) under random limits
// around the encoding's size.
func TestFitOutputsIsTheLargestFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	chars := []string{"a", "b/", "é", "<", ">", "&", "\"", "\\", "\u2028", "\x01", "日本", " "}
	word := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(chars[rng.IntN(len(chars))])
		}
		return b.String()
	}
	for round := range 300 {
		r := Result{SchemaVersion: 1, Type: TypePublished, ID: "ev" + word(), Time: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC),
			PipelineID: "p", DestinationID: "d", Written: 3, Message: word(), OutputsTruncated: true}
		outputs := make([]OutputRef, 1+rng.IntN(60))
		for i := range outputs {
			o := OutputRef{Path: word(), Action: ActionWritten}
			if rng.IntN(3) > 0 {
				o.SHA256, o.Size = "sha256:"+strings.Repeat("0", 64), int64(rng.IntN(5000))
			}
			if rng.IntN(4) == 0 {
				o.URL = "https://x/" + word()
			}
			outputs[i] = o
		}
		whole, err := json.Marshal(Result{Outputs: outputs, SchemaVersion: r.SchemaVersion, Type: r.Type, ID: r.ID, Time: r.Time,
			PipelineID: r.PipelineID, DestinationID: r.DestinationID, Written: r.Written, Message: r.Message})
		if err != nil {
			t.Fatal(err)
		}
		if fits := len(whole) + rng.IntN(3); rng.IntN(4) == 0 {
			r.OutputsTruncated, r.Outputs = false, outputs
			if got, err := fitResult(r, fits); err != nil || !bytes.Equal(got, whole) {
				t.Fatalf("round %d: a result that fits its limit encodes as %q, %v; want %q", round, got, err, whole)
			}
			r.OutputsTruncated = true
		}
		limit := rng.IntN(len(whole)) // the whole, untruncated, does not fit
		with := func(k int) Result { r.Outputs = outputs[:k:k]; return r }
		want, wantOK := largestFit(len(outputs), limit, with)
		e := &encodedOutputs{list: outputs}
		if rng.IntN(2) == 0 {
			// As fitResult does: the whole, measured first, does not fit.
			r.OutputsTruncated = false
			if _, fits, err := e.whole(with(len(outputs)), limit); err != nil || fits {
				t.Fatalf("round %d: the whole fits %v, %v; want it over the limit", round, fits, err)
			}
			r.OutputsTruncated = true
		}
		got, ok := e.fit(r, limit)
		if ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("round %d, limit %d of %d: fit = %q, %v; the probes keep %q, %v", round, limit, len(whole), got, ok, want, wantOK)
		}
	}
}

// outputRefJSON is OutputRef as encoding/json writes it: size is present
// exactly when the digest is or the size is not 0.
type outputRefJSON struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
	Size   *int64 `json:"size,omitempty"`
	URL    string `json:"url,omitempty"`
	Action string `json:"action"`
}

// An output encodes as encoding/json encodes its fields, and its measured
// length is that encoding's, whatever its strings hold: escaped
// characters, HTML ones, U+2028, invalid UTF-8, sizes that are and are
// not written.
func TestOutputEncodingIsEncodingJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	chars := []string{"a", "/", "é", "<", ">", "&", "\"", "\\", "\u2028", "\u2029", "\x01", "\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t",
		"日本", "\xff", "\xc3", "\xe2\x80", "\U0001F600", " ", "\ufffd"}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(10) {
			b.WriteString(chars[rng.IntN(len(chars))])
		}
		return b.String()
	}
	for round := range 5000 {
		o := OutputRef{Path: word(), Action: word()}
		if rng.IntN(2) == 0 {
			o.SHA256 = word()
		}
		if rng.IntN(2) == 0 {
			o.Size = rng.Int64N(1<<40) - 1<<20
		}
		if rng.IntN(2) == 0 {
			o.URL = word()
		}
		w := outputRefJSON{Path: o.Path, SHA256: o.SHA256, URL: o.URL, Action: o.Action}
		if o.SHA256 != "" || o.Size != 0 {
			w.Size = &o.Size
		}
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if direct, err := o.MarshalJSON(); err != nil || !bytes.Equal(direct, want) {
			t.Fatalf("round %d: %+v: MarshalJSON = %s, %v; want %s", round, o, direct, err, want)
		}
		data, err := json.Marshal(o)
		if err != nil || !bytes.Equal(data, want) {
			t.Fatalf("round %d: %+v encodes as %s, %v; want %s", round, o, data, err, want)
		}
		if got := o.encodedLen(); got != len(data) {
			t.Fatalf("round %d: %+v measures %d bytes, encodes as %d: %s", round, o, got, len(data), data)
		}
	}
}

// BenchmarkFitResult: a published result of 10,000 outputs (1.5 MB
// encoded) cut to the 512 KiB a result may hold: by the measured outputs, and by
// probes that encode the whole result each (largestFit alone); and one of
// 1,000 outputs that fits, against encoding it once.
func BenchmarkFitResult(b *testing.B) {
	r := Result{SchemaVersion: 1, Type: TypePublished, ID: "ev1.site", Time: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC), PipelineID: "p", DestinationID: "site"}
	for i := range 10_000 {
		r.Outputs = append(r.Outputs, OutputRef{Path: fmt.Sprintf("dir%02d/file%06d.bin", i%50, i), SHA256: "sha256:" + strings.Repeat("0", 64), Size: 4096, Action: ActionUpdated})
	}
	const limit = DefaultMaxResultBytes
	b.Run("measured", func(b *testing.B) {
		for b.Loop() {
			if _, err := fitResult(r, limit); err != nil {
				b.Fatal(err)
			}
		}
	})
	fits := r
	fits.Outputs = r.Outputs[:1000]
	b.Run("fits", func(b *testing.B) {
		for b.Loop() {
			if _, err := fitResult(fits, limit); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fits-encoded", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(fits); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("probes", func(b *testing.B) {
		for b.Loop() {
			t := r
			t.OutputsTruncated = true
			if _, ok := largestFit(len(r.Outputs), limit, func(k int) Result { t.Outputs = r.Outputs[:k:k]; return t }); !ok {
				b.Fatal("nothing fits")
			}
		}
	})
}
