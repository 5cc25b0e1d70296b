package storagetest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/distributor/distributor/storage"
)

// testOpenVersioned: Open with Versioned streams what ReadVersion returns, with a
// version the compare-and-swap takes (ReadVersion's own for the same
// bytes), known only once the bytes are read; Reread gives the same
// bytes again, never another version's; a missing object is ErrNotExist.
func testOpenVersioned(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	if _, err := b.Open(ctx, "missing.json", storage.Versioned); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Open with Versioned of a missing object = %v, want ErrNotExist", err)
	}
	for _, size := range []int{0, 100, 3 << 20} {
		p := "versioned.json"
		data := make([]byte, size)
		_, _ = rand.NewChaCha8([32]byte{byte(size)}).Read(data) // never fails
		_ = b.Delete(ctx, p)
		if _, err := b.WriteIfVersion(ctx, p, data, ""); err != nil {
			t.Fatal(err)
		}
		_, readV, err := b.ReadVersion(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		vr, err := b.Open(ctx, p, storage.Versioned)
		if err != nil {
			t.Fatalf("Open with Versioned (%d bytes): %v", size, err)
		}
		if _, err := vr.Version(); err == nil && size > 0 {
			t.Fatalf("Version before the read ended: no error")
		}
		got, err := io.ReadAll(vr)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Open with Versioned read %d bytes, %v; want the %d written", len(got), err, size)
		}
		v, err := vr.Version()
		if err != nil || v == "" {
			t.Fatalf("Version = %q, %v", v, err)
		}
		if size < 1<<20 && v != readV {
			t.Fatalf("Version = %q, ReadVersion's %q", v, readV)
		}
		again, err := vr.Reread(ctx)
		if err != nil {
			t.Fatalf("Reread: %v", err)
		}
		if got, err := io.ReadAll(again); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Reread read %d bytes, %v; want the %d read", len(got), err, size)
		}
		again.Close()

		// Replaced since: a reread is the bytes read or a conflict.
		next, err := b.WriteIfVersion(ctx, p, append(bytes.Clone(data), "more"...), v)
		if err != nil {
			t.Fatalf("WriteIfVersion with Open with Versioned's version: %v", err)
		}
		if again, err := vr.Reread(ctx); err == nil {
			got, err := io.ReadAll(again)
			again.Close()
			if err == nil && !bytes.Equal(got, data) || err != nil && !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("Reread after a replacement read %d bytes, %v; want the bytes read or ErrConflict", len(got), err)
			}
		} else if !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("Reread after a replacement = %v, want ErrConflict or the bytes read", err)
		}
		vr.Close()
		if _, err := b.WriteIfVersion(ctx, p, data, v); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("WriteIfVersion with the replaced version = %v (was %q, now %q), want ErrConflict", err, v, next)
		}
	}
}
