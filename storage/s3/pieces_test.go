package s3

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// A document written in pieces of any sizes reads back whole, from any
// offset, and seeks as a request body must (iotest.TestReader).
func TestPiecesReadBackWhatWasWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var p pieces
		var want []byte
		for range rng.IntN(12) {
			b := make([]byte, rng.IntN(40))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			want = append(want, b...)
			p.Write(b)
			clear(b) // the writer reuses its buffer
		}
		if err := iotest.TestReader(p.reader(), want); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, err := io.ReadAll(p.reader())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: read %q, %v; want %q", round, got, err, want)
		}
	}
}
