package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/distributor/distributor/storage"
)

// largeDoc is a document of over 1 MiB (statVersionMin) whose first 16
// bytes say n; every one has the same size.
func largeDoc(n int) []byte {
	doc := bytes.Repeat([]byte("."), statVersionMin+64)
	copy(doc, fmt.Sprintf("%016d", n))
	return doc
}

// from writes data in pieces, as an encoder does.
func from(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		for len(data) > 0 {
			n := min(len(data), 100_000)
			if _, err := w.Write(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
}

// writeIfVersionFrom (a large catalog's commit, encoded as it is written)
// keeps WriteIfVersion's conditions, its versions are WriteIfVersion's,
// and a failing writer changes nothing.
func TestWriteIfVersionFrom(t *testing.T) {
	t.Parallel()
	for _, ti := range testImpls {
		b := ti.new(t)
		general := ti.name
		ctx := t.Context()
		v1, err := b.writeIfVersionFrom(ctx, "cat.json", from(largeDoc(1)), "")
		must(t, err)
		if _, err := b.writeIfVersionFrom(ctx, "cat.json", from(largeDoc(2)), ""); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("impl %s: writeIfVersionFrom(must not exist) over an object: %v, want ErrConflict", general, err)
		}
		data, v, err := b.ReadVersion(ctx, "cat.json")
		if err != nil || !bytes.Equal(data, largeDoc(1)) || v != v1 {
			t.Fatalf("impl %s: ReadVersion = %d bytes, %q, %v; want the streamed bytes and version %q", general, len(data), v, err, v1)
		}
		broken := errors.New("encoder failed")
		failing := func(w io.Writer) error {
			if _, err := w.Write(largeDoc(3)); err != nil {
				return err
			}
			return broken
		}
		if _, err := b.writeIfVersionFrom(ctx, "cat.json", failing, v1); !errors.Is(err, broken) {
			t.Fatalf("impl %s: writeIfVersionFrom with a failing writer: %v, want its error", general, err)
		}
		if data, v, err := b.ReadVersion(ctx, "cat.json"); err != nil || !bytes.Equal(data, largeDoc(1)) || v != v1 {
			t.Fatalf("impl %s: after a failing writer: %d bytes, %q, %v; want the first write", general, len(data), v, err)
		}
		v2, err := b.writeIfVersionFrom(ctx, "cat.json", from(largeDoc(4)), v1)
		if err != nil {
			t.Fatalf("impl %s: writeIfVersionFrom(current version): %v", general, err)
		}
		if _, err := b.WriteIfVersion(ctx, "cat.json", []byte("stale"), v1); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("impl %s: WriteIfVersion(version before the streamed write): %v, want ErrConflict", general, err)
		}
		if _, err := b.WriteIfVersion(ctx, "cat.json", []byte("next"), v2); err != nil {
			t.Fatalf("impl %s: WriteIfVersion(the streamed write's version): %v", general, err)
		}
		wantTree(t, b.root, ".distributor/", ".distributor/cas.lock", "cat.json")
	}
}
