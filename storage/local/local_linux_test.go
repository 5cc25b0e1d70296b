package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

func TestOpenStreamsFile(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	data := bytes.Repeat([]byte("x"), 1<<20)
	_, err := b.Put(t.Context(), "f", bytes.NewReader(data), int64(len(data)), storage.PutOptions{})
	must(t, err)
	rc, err := b.Open(t.Context(), "f")
	must(t, err)
	defer rc.Close()
	// A stream over the open file, not its bytes read into memory.
	if _, ok := rc.ReadCloser.(*fdFile); !ok {
		t.Fatalf("Open returned %T, want a file stream", rc.ReadCloser)
	}
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("read %d, %v", n, err)
	}
}

// TestSmallWritesAllocateLittle: a service's writes are mostly small (the
// catalog, the intent, one-file outputs); their copy buffer is sized to
// the object, not a fixed 256 KiB each.
func TestSmallWritesAllocateLittle(t *testing.T) {
	b := newBackend(t)
	data := []byte("# a one-line report\n")
	if _, err := b.WriteIfVersion(t.Context(), "c.json", data, ""); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		if _, err := b.Put(t.Context(), fmt.Sprintf("r%d.md", i%10), bytes.NewReader(data), int64(len(data)), storage.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteIfVersion(t.Context(), "c.json", data, Version(data)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / (2 * n); per > 32<<10 {
		t.Errorf("a %d-byte write allocated %d KiB on average, want at most 32 KiB", len(data), per>>10)
	}
}

// settledLarge writes a file large enough for a stat version and lets it
// settle (with the backend's settle time shortened).
func settledLarge(t *testing.T) (*Backend, []byte) {
	t.Helper()
	b := testImpl{opts: []Option{withSettle(50 * time.Millisecond)}}.new(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), statVersionMin/16+1)
	must(t, os.WriteFile(filepath.Join(b.root, catalog.FileName), data, 0o644))
	waitSettled(t, b, catalog.FileName)
	return b, data
}

// waitSettled waits until p's mtime and ctime are older than the backend's
// settle time.
func waitSettled(t *testing.T, b *Backend, p string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool {
		fi, err := os.Stat(filepath.Join(b.root, p))
		must(t, err)
		return settledBefore(fi, time.Now().Add(-b.settle))
	}, "%s to settle", p)
}

// TestSettledLargeFileCASByStat: a large file unchanged for a while is
// versioned by stat, so the compare-and-swap needs no second read; a write
// against that version lands, and the file just written is versioned by
// its stamp at once (no settling, no hash), read back the same.
func TestSettledLargeFileCASByStat(t *testing.T) {
	t.Parallel()
	b, data := settledLarge(t)
	got, v, err := b.ReadVersion(t.Context(), catalog.FileName)
	must(t, err)
	if !bytes.Equal(got, data) || !strings.HasPrefix(string(v), "stat:") {
		t.Fatalf("ReadVersion = %d bytes, version %q; want %d bytes and a stat version", len(got), v, len(data))
	}
	next := append([]byte("x"), data...)
	// "Just written" must hold however slowly a loaded machine runs the
	// next lines: the file is unsettled for a minute from now on.
	b = testImpl{opts: []Option{withSettle(time.Minute)}}.at(t, b.root)
	nv, err := b.WriteIfVersion(t.Context(), catalog.FileName, next, v)
	must(t, err)
	if !strings.HasPrefix(string(nv), "stamp:") {
		t.Fatalf("WriteIfVersion = %q, want a stamp version", nv)
	}
	if _, rv, err := b.ReadVersion(t.Context(), catalog.FileName); err != nil || rv != nv {
		t.Fatalf("ReadVersion right after the write = %q, %v; want %q", rv, err, nv)
	}
}

// TestStatVersionSeesEveryChange: after a stat-versioned read, rewriting the
// file in place with the same bytes, or replacing it with a copy, is a
// conflict for both compare-and-swap operations; deleting against the
// current version works.
func TestStatVersionSeesEveryChange(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(t *testing.T, path string, data []byte){
		"same bytes in place": func(t *testing.T, path string, data []byte) {
			must(t, os.WriteFile(path, data, 0o644))
		},
		"replaced by a copy": func(t *testing.T, path string, data []byte) {
			must(t, os.WriteFile(path+".new", data, 0o644))
			must(t, os.Rename(path+".new", path))
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, data := settledLarge(t)
			_, v, err := b.ReadVersion(t.Context(), catalog.FileName)
			must(t, err)
			change(t, filepath.Join(b.root, catalog.FileName), data)
			if _, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("x"), v); !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("WriteIfVersion after the change: %v, want ErrConflict", err)
			}
			if err := b.DeleteIfVersion(t.Context(), catalog.FileName, v); !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("DeleteIfVersion after the change: %v, want ErrConflict", err)
			}
			waitSettled(t, b, catalog.FileName)
			_, cur, err := b.ReadVersion(t.Context(), catalog.FileName)
			must(t, err)
			if cur == v || !strings.HasPrefix(string(cur), "stat:") {
				t.Fatalf("version after the change = %q (before %q); want another stat version", cur, v)
			}
			must(t, b.DeleteIfVersion(t.Context(), catalog.FileName, cur))
			if _, err := os.Stat(filepath.Join(b.root, catalog.FileName)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("after DeleteIfVersion: %v, want the file gone", err)
			}
		})
	}
}

// TestStampVersionSeesEveryChange: a stamped version (a large file written
// by WriteIfVersion a moment ago) goes stale when the file is replaced by a
// copy (same bytes, even with the attribute copied), rewritten in place with
// other bytes, or written again by WriteIfVersion with the same bytes.
func TestStampVersionSeesEveryChange(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(t *testing.T, b *Backend, path string, data []byte, v storage.Version){
		"replaced by a copy with its stamp": func(t *testing.T, _ *Backend, path string, data []byte, _ storage.Version) {
			stamp := make([]byte, stampLen)
			_, err := unix.Getxattr(path, stampAttr, stamp)
			must(t, err)
			must(t, os.WriteFile(path+".new", data, 0o644))
			must(t, unix.Setxattr(path+".new", stampAttr, stamp, 0))
			must(t, os.Rename(path+".new", path))
		},
		"other bytes in place": func(t *testing.T, _ *Backend, path string, data []byte, _ storage.Version) {
			must(t, os.WriteFile(path, bytes.ToUpper(data), 0o644))
		},
		"written again, same bytes": func(t *testing.T, b *Backend, _ string, data []byte, v storage.Version) {
			_, err := b.WriteIfVersion(t.Context(), catalog.FileName, data, v)
			must(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			data := bytes.Repeat([]byte("0123456789abcdef"), statVersionMin/16+1)
			v, err := b.WriteIfVersion(t.Context(), catalog.FileName, data, "")
			must(t, err)
			if !strings.HasPrefix(string(v), "stamp:") {
				t.Skipf("no stamp on this file system (version %q)", v)
			}
			change(t, b, filepath.Join(b.root, catalog.FileName), data, v)
			if _, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("x"), v); !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("WriteIfVersion after the change: %v, want ErrConflict", err)
			}
			if err := b.DeleteIfVersion(t.Context(), catalog.FileName, v); !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("DeleteIfVersion after the change: %v, want ErrConflict", err)
			}
		})
	}
}

// withSettle sets how long a file must have been unchanged for a stat
// version (tests shorten or lengthen it).
func withSettle(d time.Duration) Option { return func(b *Backend) { b.settle = d } }

// TestContentVersionOfALargeFileHoldsOnceItSettles: a large file without
// a stamp, read before it settled, has its content's version; a write
// against that version still lands once the file has settled (its
// version would now be its stat): the version read names the content.
func TestContentVersionOfALargeFileHoldsOnceItSettles(t *testing.T) {
	t.Parallel()
	b := testImpl{opts: []Option{withSettle(time.Minute)}}.new(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), statVersionMin/16+1)
	must(t, os.WriteFile(filepath.Join(b.root, catalog.FileName), data, 0o644))
	_, v, err := b.ReadVersion(t.Context(), catalog.FileName)
	must(t, err)
	if !strings.HasPrefix(string(v), "sha256:") {
		t.Fatalf("ReadVersion of a file just written without a stamp = %q, want its content's version", v)
	}
	b = testImpl{opts: []Option{withSettle(50 * time.Millisecond)}}.at(t, b.root)
	waitSettled(t, b, catalog.FileName)
	if _, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("next"), v); err != nil {
		t.Fatalf("WriteIfVersion against the content's version once settled: %v", err)
	}
}
