package ctxio_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/distributor/distributor/internal/ctxio"
)

func TestReaderStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := ctxio.Reader(ctx, strings.NewReader("abcdef"))
	buf := make([]byte, 3)
	if n, err := r.Read(buf); n != 3 || err != nil || string(buf) != "abc" {
		t.Fatalf("Read = %d, %v (%q); want 3, nil (\"abc\")", n, err, buf)
	}
	cancel()
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %d, %v; want 0, context.Canceled", n, err)
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("io.Copy after cancel: %v; want context.Canceled", err)
	}
}
