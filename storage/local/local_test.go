package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
	"github.com/distributor/distributor/testenv"
)

func newBackend(t testing.TB) *Backend {
	t.Helper()
	b, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// contractVariants are the local backends the whole contract suite runs
// against, each on fresh temp roots opened with its options.
var contractVariants = []struct {
	name string
	opts []Option
}{
	{"default", nil},
	// Catalogs of more than 8 records take the large-catalog ways: encoded
	// as the commit writes them, or beside the caller's writes and named
	// by the Sync before the commit.
	{"stream-min-8", []Option{WithStreamMinOutputs(8)}},
}

// TestContract runs the whole storage contract (storagetest.RunAll) on
// every variant; an interrupted write is a writer process killed midway.
func TestContract(t *testing.T) {
	t.Parallel()
	for _, v := range contractVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			storagetest.RunAll(t, func(t *testing.T) storage.Backend {
				b, err := New(t.TempDir(), v.opts...)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}, interruptByKill)
		})
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("rel", 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New("rel")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "rel"); b.String() != want {
		t.Fatalf("String() = %q, want %q", b.String(), want)
	}

	_, err = New(filepath.Join(dir, "missing"))
	if want := "local root " + filepath.Join(dir, "missing") + " does not exist: create the folder first"; err == nil || err.Error() != want {
		t.Fatalf("New(missing) error = %v, want %q", err, want)
	}
	if err := os.WriteFile("file", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New("file")
	if want := "local root " + filepath.Join(dir, "file") + " is not a folder"; err == nil || err.Error() != want {
		t.Fatalf("New(file) error = %v, want %q", err, want)
	}
}

func TestSymlinksRefused(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(outside, filepath.Join(b.root, "out")))
	must(t, os.Symlink(secret, filepath.Join(b.root, "secret-link")))
	must(t, os.Mkdir(filepath.Join(b.root, "real"), 0o755))
	must(t, os.Symlink("real", filepath.Join(b.root, "inside-link"))) // inside, still refused

	for _, p := range []string{"out/secret", "out/new", "secret-link", "inside-link/x"} {
		wantOutside := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, ErrOutsideRoot) {
				t.Errorf("%s(%q) error = %v, want ErrOutsideRoot", op, p, err)
			}
		}
		_, err := b.Stat(ctx, p)
		wantOutside("Stat", err)
		_, err = b.Open(ctx, p)
		wantOutside("Open", err)
		_, err = b.Put(ctx, p, strings.NewReader("pwned"), 5, storage.PutOptions{})
		wantOutside("Put", err)
		_, _, err = b.ReadVersion(ctx, p)
		wantOutside("ReadVersion", err)
		_, err = b.WriteIfVersion(ctx, p, []byte("pwned"), "")
		wantOutside("WriteIfVersion", err)
		wantOutside("DeleteIfVersion", b.DeleteIfVersion(ctx, p, Version([]byte("secret"))))
		if p != "secret-link" { // unlinking a link itself is allowed, below
			wantOutside("Delete", b.Delete(ctx, p))
		}
	}
	err := b.List(ctx, "out/", func(storage.ObjectInfo) error { return nil })
	if !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("List(out/) error = %v, want ErrOutsideRoot", err)
	}
	_, err = b.Stat(ctx, "out/secret")
	if want := fmt.Sprintf(`local root %s: "out/secret": path leads through a symlink "out"; symlinks are refused so that nothing outside the root is touched`, b.root); err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	// List reports links (never following them): they occupy paths, so a
	// publication that wants one sees a collision.
	list := func() []string {
		var got []string
		must(t, b.List(ctx, "", func(oi storage.ObjectInfo) error { got = append(got, oi.Path); return nil }))
		return got
	}
	if got, want := list(), []string{"inside-link", "out", "secret-link"}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	// Delete unlinks a link itself; its target is untouched (checked below).
	must(t, b.Delete(ctx, "secret-link"))
	if got, want := list(), []string{"inside-link", "out"}; !slices.Equal(got, want) {
		t.Errorf("List after deleting the link = %q, want %q", got, want)
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "secret" {
		t.Fatalf("outside file = %q, %v; want it untouched", data, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("outside folder has %d entries, want 1", len(entries))
	}
}

func TestDotDotRefused(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	must(t, os.Mkdir(root, 0o755))
	b, err := New(root)
	must(t, err)
	for _, p := range []string{"../escape", "a/../../escape", "/etc/escape"} {
		_, err := b.Put(t.Context(), p, strings.NewReader("x"), 1, storage.PutOptions{})
		if !errors.Is(err, catalog.ErrBadPath) {
			t.Errorf("Put(%q) error = %v, want ErrBadPath", p, err)
		}
	}
	_, err = b.Put(t.Context(), "../escape", strings.NewReader("x"), 1, storage.PutOptions{})
	if want := fmt.Sprintf(`local root %s: invalid path "../escape": has a ".." segment`, root); err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(parent, "escape")); !os.IsNotExist(err) {
		t.Fatalf("file outside the root: %v", err)
	}
}

func TestDeleteRemovesEmptiedFolders(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	for _, p := range []string{"a/b/c/f", "a/g", "top"} {
		_, err := b.Put(ctx, p, strings.NewReader(p), int64(len(p)), storage.PutOptions{})
		must(t, err)
	}
	must(t, b.Delete(ctx, "a/b/c/f"))
	wantTree(t, b.root, "a/", "a/g", "top")
	must(t, b.Delete(ctx, "a/g", "top"))
	wantTree(t, b.root)
	if fi, err := os.Stat(b.root); err != nil || !fi.IsDir() {
		t.Fatalf("root removed: %v", err)
	}
	// A folder holding only a subfolder someone else made is emptied too;
	// a folder still holding anything is kept.
	_, err := b.Put(ctx, "x/y/z", strings.NewReader("z"), 1, storage.PutOptions{})
	must(t, err)
	must(t, os.Mkdir(filepath.Join(b.root, "x", "keep"), 0o755))
	must(t, b.Delete(ctx, "x/y/z"))
	wantTree(t, b.root, "x/", "x/keep/")
	// DeleteIfVersion empties folders the same way.
	v, err := b.WriteIfVersion(ctx, "p/q/lock", []byte("l"), "")
	must(t, err)
	must(t, b.DeleteIfVersion(ctx, "p/q/lock", v))
	wantTree(t, b.root, ".distributor/", ".distributor/cas.lock", "x/", "x/keep/")
}

// wantTree compares everything under root (folders end in '/').
func wantTree(t *testing.T, root string, want ...string) {
	t.Helper()
	var got []string
	must(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		got = append(got, filepath.ToSlash(rel))
		return nil
	}))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree = %q, want %q", got, want)
	}
}

var errBoom = errors.New("boom")

type failAfter struct {
	n int
}

func (r *failAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errBoom
	}
	p = p[:min(len(p), r.n)]
	r.n -= len(p)
	return len(p), nil
}

func TestTempFilesNeverListed(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	_, err := b.Put(ctx, "f", &failAfter{n: 100 << 10}, 200<<10, storage.PutOptions{})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Put error = %v, want the reader's error", err)
	}
	// The failed Put left no temp file behind.
	wantTree(t, b.root)
	// A stray temp (a crash mid-Put) beside its target is not an object,
	// in any folder.
	must(t, os.MkdirAll(filepath.Join(b.root, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.root, "sub", catalog.TempPrefix+"CRASH"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(b.root, catalog.TempPrefix+"crash"), []byte("x"), 0o644))
	_, err = b.Put(ctx, "sub/state", strings.NewReader("s"), 1, storage.PutOptions{})
	must(t, err)
	for _, prefix := range []string{"", "sub/", "sub/" + catalog.TempPrefix, catalog.TempPrefix} {
		var got []string
		must(t, b.List(ctx, prefix, func(oi storage.ObjectInfo) error { got = append(got, oi.Path); return nil }))
		want := []string{"sub/state"}
		if strings.Contains(prefix, catalog.TempPrefix) {
			want = nil
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	// Temp names are reserved: nothing can be published under one.
	if err := catalog.ValidateOutputPath("sub/" + catalog.TempPrefix + "x"); !errors.Is(err, catalog.ErrBadPath) {
		t.Errorf("a temp name is a valid output path: %v", err)
	}
}

func TestPutSizeMismatch(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	_, err := b.Put(t.Context(), "short", strings.NewReader("abc"), 4, storage.PutOptions{})
	want := fmt.Sprintf(`put "short" in %s: the source gave 3 bytes, expected 4`, b.root)
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if _, err := b.Stat(t.Context(), "short"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat after failed Put: %v, want ErrNotExist", err)
	}
}

func TestVersionIsContentDigest(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	data := []byte("catalog bytes")
	v, err := b.WriteIfVersion(t.Context(), catalog.FileName, data, "")
	must(t, err)
	want := storage.Version(fmt.Sprintf("sha256:%x", sha256.Sum256(data)))
	if v != want {
		t.Fatalf("version = %q, want %q", v, want)
	}
	if fi, err := os.Stat(filepath.Join(b.root, catalog.FileName)); err != nil || fi.Mode().Perm() != 0o644&^umask() {
		t.Fatalf("catalog file mode: %v, %v", fi.Mode(), err)
	}
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// TestLockExcludesOtherHolders holds the lock file the way another process
// would (its own open file description) and checks that CAS waits for it.
func TestLockExcludesOtherHolders(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	other, err := New(b.root) // a second backend on the same root
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(b.root, ".distributor"), 0o755))
	f, err := os.OpenFile(filepath.Join(b.root, ".distributor", "cas.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = other.WriteIfVersion(ctx, "cat", []byte("x"), "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteIfVersion while locked: %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.WriteIfVersion(t.Context(), "cat", []byte("x"), "")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("WriteIfVersion finished while the lock was held: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	f.Close() // release
	must(t, <-done)
}

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
	if _, ok := rc.(*fdFile); !ok {
		t.Fatalf("Open returned %T, want a file stream", rc)
	}
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("read %d, %v", n, err)
	}
}

func BenchmarkPut4KiB(b *testing.B) {
	be := newBackend(b)
	data := bytes.Repeat([]byte("x"), 4<<10)
	b.SetBytes(int64(len(data)))
	for i := 0; b.Loop(); i++ {
		p := fmt.Sprintf("d%02d/f%06d", i%50, i)
		if _, err := be.Put(b.Context(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeferSyncWritesAreVisibleAndSyncSucceeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p := fmt.Sprintf("d/f%d.txt", i)
		if _, err := b.Put(ctx, p, strings.NewReader("x"), 1, storage.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	n := 0
	if err := b.List(ctx, "d/", func(storage.ObjectInfo) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("listed %d objects (%v), want 3", n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Sync(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with a cancelled context: %v", err)
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
	b := newBackend(t)
	b.settle = 50 * time.Millisecond
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
	b.settle = time.Minute
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

// TestStreamedWriteReportsTheWritesOwnFailure: when the write a stream
// feeds fails (here: cancelled halfway), WriteIfVersionFrom returns that
// failure, not the stopped stream's, and the old object stays.
func TestStreamedWriteReportsTheWritesOwnFailure(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	v, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("old"), "")
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	_, err = b.WriteIfVersionFrom(ctx, catalog.FileName, func(w io.Writer) error {
		for i := 0; ; i++ {
			if i == 64 {
				cancel()
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
	}, v)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteIfVersionFrom cancelled halfway: %v, want context.Canceled", err)
	}
	if got, cur, err := b.ReadVersion(t.Context(), catalog.FileName); err != nil || string(got) != "old" || cur != v {
		t.Fatalf("after the failed write: %q, %q, %v; want the old object", got, cur, err)
	}
}

// commitErr is the error of a Stage.Commit.
func commitErr(_ storage.ObjectInfo, err error) error { return err }
