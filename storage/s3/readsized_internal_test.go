package s3

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readSized returns the whole body whatever the announced size, and the
// reader's error.
func TestReadSizedReadsTheWholeBody(t *testing.T) {
	body := strings.Repeat("catalog ", 1000)
	readers := map[string]func() io.Reader{
		"plain":      func() io.Reader { return strings.NewReader(body) },
		"one byte":   func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"data + EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		"half":       func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
	}
	for name, r := range readers {
		for _, size := range []int64{int64(len(body)), 0, -1, 1, int64(len(body)) - 1, int64(len(body)) + 1, 10 * int64(len(body)), 2 << 30} {
			got, err := readSized(r(), size)
			if err != nil || string(got) != body {
				t.Fatalf("%s, size %d: %d bytes, %v; want the %d bytes", name, size, len(got), err, len(body))
			}
		}
	}
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader(body[:100]), iotest.ErrReader(boom))
	if got, err := readSized(r, int64(len(body))); !errors.Is(err, boom) || got != nil {
		t.Fatalf("failing reader: %q, %v; want nil, %v", got, err, boom)
	}
	if got, err := readSized(bytes.NewReader(nil), 5); err != nil || len(got) != 0 {
		t.Fatalf("empty body announced as 5 bytes: %q, %v", got, err)
	}
}
