package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// randomBytes is n bytes of a fixed pseudo-random sequence.
func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// fileCached reports whether the page cache holds the file's bytes at
// its start, middle and end, asking without reading (RWF_NOWAIT).
func fileCached(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	for _, off := range []int64{0, st.Size() / 2, st.Size() - 1} {
		if _, err := unix.Preadv2(int(f.Fd()), [][]byte{b[:]}, off, unix.RWF_NOWAIT); errors.Is(err, unix.EAGAIN) {
			return false
		}
	}
	return true
}

// supportsDirect reports whether the file system of dir takes direct
// writes (tmpfs, for one, may not): the tests of what they leave in the
// page cache need one that does.
func supportsDirect(t *testing.T, dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, "probe"), unix.O_CREAT|unix.O_WRONLY|unix.O_DIRECT, 0o644)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return os.Remove(filepath.Join(dir, "probe")) == nil
}

// A streamed version is written exactly, whatever its size against the
// direct chunks and blocks, and written past the page cache: none of it
// is left there.
func TestPreparedStreamIsWrittenPastThePageCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, n := range []int{0, 1, directAlign - 1, directAlign, directAlign + 1, directChunk, 2*directChunk + directAlign + 7} {
		b := newBackend(t)
		want := randomBytes(n)
		pv, err := b.prepareStream(ctx, "cat.json", func(w io.Writer) error {
			// In pieces of another size than the chunks.
			for r := bytes.NewReader(want); r.Len() > 0; {
				if _, err := io.CopyN(w, r, 100_003); err != nil && err != io.EOF {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pv.CommitIfVersion(ctx, ""); err != nil {
			t.Fatal(err)
		}
		must(t, pv.Close())
		p := filepath.Join(b.root, "cat.json")
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes written: read %d bytes back (%v), not the same", n, len(got), err)
		}
		if n >= directChunk && supportsDirect(t, b.root) {
			b2 := newBackend(t)
			p2 := filepath.Join(b2.root, "cat.json")
			pv, err := b2.prepareStream(ctx, "cat.json", func(w io.Writer) error { _, err := w.Write(want); return err })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pv.CommitIfVersion(ctx, ""); err != nil {
				t.Fatal(err)
			}
			must(t, pv.Close())
			if fileCached(t, p2) {
				t.Fatalf("%d bytes written directly: the page cache holds them", n)
			}
		}
	}
}
