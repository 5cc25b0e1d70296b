package local

import (
	"bytes"
	"context"
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

// fileCached reports whether the page cache holds any of the file's
// bytes at its start, middle or end (cached).
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
	return cached(int(f.Fd()), st.Size())
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

// A versioned read of a large file the page cache does not hold reads it
// directly: the same bytes, read again the same by Reread, and the
// cache still does not hold it. One the cache holds is read from there.
func TestVersionedReadOfAnUncachedFileReadsPastThePageCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	if !supportsDirect(t, b.root) {
		t.Skip("the file system takes no direct writes")
	}
	want := randomBytes(directReadMin + 3*directAlign + 5)
	pv, err := b.prepareStream(ctx, "cat.json", func(w io.Writer) error { _, err := w.Write(want); return err })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pv.CommitIfVersion(ctx, ""); err != nil {
		t.Fatal(err)
	}
	must(t, pv.Close())
	p := filepath.Join(b.root, "cat.json")
	for _, uncached := range []bool{true, false} {
		r, err := b.openVersion(ctx, "cat.json")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(r, 7777)) // a read not on a chunk's edge first
		if err == nil {
			var rest []byte
			rest, err = io.ReadAll(r)
			got = append(got, rest...)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("uncached %v: read %d bytes (%v), not the file's", uncached, len(got), err)
		}
		again, err := r.Reread(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(again)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("uncached %v: reread %d bytes (%v), not the file's", uncached, len(got), err)
		}
		again.Close()
		r.Close()
		if uncached && fileCached(t, p) {
			t.Fatal("a direct read left the file in the page cache")
		}
		if _, err := os.ReadFile(p); err != nil { // now the cache holds it
			t.Fatal(err)
		}
	}
}
