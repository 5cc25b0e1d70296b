package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
)

// contractVariants are the options the whole contract suite runs with on
// each implementation, each on fresh temp roots.
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
// every implementation and variant; an interrupted write is a writer
// process killed midway.
func TestContract(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) {
		for _, v := range contractVariants {
			t.Run(v.name, func(t *testing.T) {
				t.Parallel()
				opts := append(slices.Clone(ti.opts), v.opts...)
				storagetest.RunAll(t, func(t *testing.T) storage.Backend {
					b, err := New(t.TempDir(), opts...)
					if err != nil {
						t.Fatal(err)
					}
					return b
				}, interruptByKill)
			})
		}
	})
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
	eachImpl(t, symlinksRefused)
}

func symlinksRefused(t *testing.T, ti testImpl) {
	b := ti.new(t)
	ctx := t.Context()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(b.root, "out"))
	symlink(t, secret, filepath.Join(b.root, "secret-link"))
	must(t, os.Mkdir(filepath.Join(b.root, "real"), 0o755))
	symlink(t, "real", filepath.Join(b.root, "inside-link")) // inside, still refused

	for _, p := range []string{"out/secret", "out/new", "secret-link", "inside-link/x"} {
		wantOutside := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, storage.ErrSymlink) {
				t.Errorf("%s(%q) error = %v, want storage.ErrSymlink", op, p, err)
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
	if !errors.Is(err, storage.ErrSymlink) {
		t.Errorf("List(out/) error = %v, want storage.ErrSymlink", err)
	}
	_, err = b.Stat(ctx, "out/secret")
	if want := fmt.Sprintf(`local root %s: "out/secret": path leads through a symlink "out"; symlinks are refused so that nothing outside the root is touched`, b.root); err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	// List reports links (never following them), marked as links: they
	// occupy paths, so a publication that wants one sees a collision, and
	// one that wants a path below one sees the link.
	list := func() []string {
		var got []string
		must(t, b.List(ctx, "", func(oi storage.ObjectInfo) error {
			if !oi.Symlink {
				t.Errorf("List: %s is a link, not marked as one", oi.Path)
			}
			got = append(got, oi.Path)
			return nil
		}))
		return got
	}
	if got, want := list(), []string{"inside-link", "out", "secret-link"}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	var found []string
	must(t, b.Find(ctx, storage.Query{}, func(oi storage.ObjectInfo) error {
		if oi.Symlink {
			found = append(found, oi.Path)
		}
		return nil
	}))
	if slices.Sort(found); !slices.Equal(found, []string{"inside-link", "out", "secret-link"}) {
		t.Errorf("Find reported the links %q", found)
	}
	if _, err := b.Put(ctx, "real/f", strings.NewReader("f"), 1, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, b.List(ctx, "real/", func(oi storage.ObjectInfo) error {
		if oi.Symlink {
			t.Errorf("List: the file %s is marked as a link", oi.Path)
		}
		return nil
	}))
	must(t, os.Remove(filepath.Join(b.root, "real", "f")))
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
	eachImpl(t, func(t *testing.T, ti testImpl) {
		parent := t.TempDir()
		root := filepath.Join(parent, "root")
		must(t, os.Mkdir(root, 0o755))
		dotDotRefused(t, ti.at(t, root), parent)
	})
}

func dotDotRefused(t *testing.T, b *Backend, parent string) {
	root := b.root
	for _, p := range []string{"../escape", "a/../../escape", "/etc/escape"} {
		_, err := b.Put(t.Context(), p, strings.NewReader("x"), 1, storage.PutOptions{})
		if !errors.Is(err, catalog.ErrBadPath) {
			t.Errorf("Put(%q) error = %v, want ErrBadPath", p, err)
		}
	}
	_, err := b.Put(t.Context(), "../escape", strings.NewReader("x"), 1, storage.PutOptions{})
	if want := fmt.Sprintf(`local root %s: invalid path "../escape": has a ".." segment`, root); err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(parent, "escape")); !os.IsNotExist(err) {
		t.Fatalf("file outside the root: %v", err)
	}
}

func TestDeleteRemovesEmptiedFolders(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { deleteRemovesEmptiedFolders(t, ti.new(t)) })
}

func deleteRemovesEmptiedFolders(t *testing.T, b *Backend) {
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
	eachImpl(t, func(t *testing.T, ti testImpl) { tempFilesNeverListed(t, ti.new(t)) })
}

func tempFilesNeverListed(t *testing.T, b *Backend) {
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
	eachImpl(t, func(t *testing.T, ti testImpl) { putSizeMismatch(t, ti.new(t)) })
}

func putSizeMismatch(t *testing.T, b *Backend) {
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
	eachImpl(t, func(t *testing.T, ti testImpl) { versionIsContentDigest(t, ti.new(t)) })
}

func versionIsContentDigest(t *testing.T, b *Backend) {
	data := []byte("catalog bytes")
	v, err := b.WriteIfVersion(t.Context(), catalog.FileName, data, "")
	must(t, err)
	want := storage.Version(fmt.Sprintf("sha256:%x", sha256.Sum256(data)))
	if v != want {
		t.Fatalf("version = %q, want %q", v, want)
	}
	if fi, err := os.Stat(filepath.Join(b.root, catalog.FileName)); err != nil || fi.Mode().Perm() != newFilePerm() {
		t.Fatalf("catalog file mode: %v, %v", fi.Mode(), err)
	}
}

// TestLockExcludesOtherHolders holds the lock file the way another process
// would (its own open file description) and checks that CAS waits for it.
func TestLockExcludesOtherHolders(t *testing.T) {
	t.Parallel()
	eachImpl(t, lockExcludesOtherHolders)
}

func lockExcludesOtherHolders(t *testing.T, ti testImpl) {
	b := ti.new(t)
	other := ti.at(t, b.root) // a second backend on the same root
	must(t, os.MkdirAll(filepath.Join(b.root, ".distributor"), 0o755))
	f, err := os.OpenFile(filepath.Join(b.root, ".distributor", "cas.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	if ok, err := tryLockFile(f); !ok || err != nil {
		t.Fatalf("lock the lock file: %v, %v", ok, err)
	}

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
	unlockFile(f)
	f.Close() // release
	must(t, <-done)
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
	eachImpl(t, func(t *testing.T, ti testImpl) { deferSyncWritesAreVisible(t, ti.new(t)) })
}

func deferSyncWritesAreVisible(t *testing.T, b *Backend) {
	ctx := context.Background()
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

// TestStreamedWriteReportsTheWritesOwnFailure: when the write a stream
// feeds fails (here: cancelled halfway), writeIfVersionFrom returns that
// failure, not the stopped stream's, and the old object stays.
func TestStreamedWriteReportsTheWritesOwnFailure(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { streamedWriteReportsItsFailure(t, ti.new(t)) })
}

func streamedWriteReportsItsFailure(t *testing.T, b *Backend) {
	v, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("old"), "")
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	_, err = b.writeIfVersionFrom(ctx, catalog.FileName, func(w io.Writer) error {
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
		t.Fatalf("writeIfVersionFrom cancelled halfway: %v, want context.Canceled", err)
	}
	if got, cur, err := b.ReadVersion(t.Context(), catalog.FileName); err != nil || string(got) != "old" || cur != v {
		t.Fatalf("after the failed write: %q, %q, %v; want the old object", got, cur, err)
	}
}

// commitErr is the error of a Stage.Commit.
func commitErr(_ storage.ObjectInfo, err error) error { return err }
