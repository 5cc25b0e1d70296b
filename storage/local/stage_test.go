package local

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
)

// The stage contract, with unnamed files, with temp names once the
// unnamed-file share is used up, and on a filesystem without O_TMPFILE.
func TestStagerContract(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tune func(b *Backend)
	}{
		{"unnamed", func(*Backend) {}},
		{"share-used-up", func(b *Backend) { b.maxUnnamed = 0 }},
		{"no-tmpfile", func(b *Backend) { b.noTmpfile.Store(true) }},
		// A kernel before 6.10 refuses linkat(AT_EMPTY_PATH): named
		// through /proc instead.
		{"link-through-proc", func(b *Backend) { b.noEmptyLink.Store(true) }},
		// A file system that cannot swap two names: replacements rename
		// over the old file.
		{"no-exchange", func(b *Backend) { b.noExchange.Store(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storagetest.RunStager(t, func(t *testing.T) storage.Backend {
				b := newBackend(t)
				tc.tune(b)
				return b
			})
		})
	}
}

// tree lists everything under root, folders with a trailing slash.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A stage closed without commits leaves the root exactly as it was: no
// file, temp name or folder of its own; folders that were there stay.
func TestStageCloseLeavesTheTreeAsItWas(t *testing.T) {
	t.Parallel()
	for _, maxUnnamed := range []int64{1 << 20, 0} {
		b := newBackend(t)
		b.maxUnnamed = maxUnnamed
		ctx := t.Context()
		must(t, os.MkdirAll(filepath.Join(b.root, "kept/empty"), 0o755))
		before := tree(t, b.root)
		st := b.Stage(t.Context())
		for _, p := range []string{"kept/empty/a.txt", "kept/new/deep/b.txt", "fresh/c.txt", "d.txt"} {
			if _, err := st.Put(ctx, p, strings.NewReader("x"), 1, storage.PutOptions{IfAbsent: true}); err != nil {
				t.Fatal(err)
			}
		}
		must(t, st.Close())
		if got := tree(t, b.root); !slices.Equal(got, before) {
			t.Errorf("maxUnnamed %d: tree after Close = %q, want %q", maxUnnamed, got, before)
		}
	}
}

// A Delete that removes a folder emptied meanwhile does not fail a staged
// write into it: its Commit makes the folder again.
func TestStageCommitAfterItsFolderWasRemoved(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	st := b.Stage(t.Context())
	defer st.Close()
	if _, err := st.Put(ctx, "d/e/new.txt", strings.NewReader("new"), 3, storage.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "d/e/other.txt", strings.NewReader("o"), 1, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, b.Delete(ctx, "d/e/other.txt")) // removes d/e and d, now empty
	if _, err := os.Stat(filepath.Join(b.root, "d")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d still there after the delete: %v", err)
	}
	if _, err := st.Commit(ctx, "d/e/new.txt"); err != nil {
		t.Fatalf("Commit into a removed folder: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(b.root, "d/e/new.txt")); err != nil || string(data) != "new" {
		t.Fatalf("d/e/new.txt = %q, %v", data, err)
	}
}

// A stage never writes through a symlinked folder, even one that appears
// after the root was opened, and never names an object onto a link.
func TestStageRefusesSymlinks(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(b.root, "out")))
	must(t, os.Mkdir(filepath.Join(b.root, "real"), 0o755))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(b.root, "real", "link")))
	st := b.Stage(t.Context())
	defer st.Close()
	for _, tc := range []struct {
		p    string
		opts storage.PutOptions
	}{
		{"out/x.txt", storage.PutOptions{IfAbsent: true}},
		{"out/deeper/x.txt", storage.PutOptions{IfAbsent: true}},
		{"real/link", storage.PutOptions{}},
	} {
		if _, err := st.Put(ctx, tc.p, strings.NewReader("pwned"), 5, tc.opts); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("stage Put %s: err = %v, want ErrOutsideRoot", tc.p, err)
		}
	}
	// A new path staged before a link took its place is not named onto it.
	if _, err := st.Put(ctx, "real/late", strings.NewReader("pwned"), 5, storage.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(b.root, "real", "late")))
	if _, err := st.Commit(ctx, "real/late"); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("Commit onto a link: err = %v, want ErrOutsideRoot", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside the root: %v", ents)
	}
}

// Past the unnamed-file share, staged writes take temp names: never
// listed, and gone after Close.
func TestStagePastTheUnnamedShareUsesTempNames(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	b.maxUnnamed = 1
	ctx := t.Context()
	st := b.Stage(t.Context())
	for _, p := range []string{"a.txt", "b.txt", "c.txt"} {
		if _, err := st.Put(ctx, p, strings.NewReader(p), int64(len(p)), storage.PutOptions{IfAbsent: true}); err != nil {
			t.Fatal(err)
		}
	}
	var temps int
	for _, name := range tree(t, b.root) {
		if catalog.IsTempName(name) {
			temps++
		}
	}
	if temps != 2 {
		t.Errorf("%d temp names while staged, want 2 (one write holds the only unnamed slot)", temps)
	}
	must(t, commitErr(st.Commit(ctx, "b.txt")))
	must(t, st.Close())
	if got := tree(t, b.root); !slices.Equal(got, []string{"b.txt"}) {
		t.Errorf("tree = %q, want only b.txt", got)
	}
	if n := b.unnamed.Load(); n != 0 {
		t.Errorf("%d unnamed slots still held after Close", n)
	}
}

// Large deferred objects start their writeback while written (every
// writebackChunk bytes), durable ones every durableChunk bytes: the bytes
// named are exactly the bytes given, of a known size or not, across chunk
// boundaries.
func TestStageLargeDeferredObjects(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	data := make([]byte, 2*writebackChunk+12345)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	stg := b.Stage(t.Context())
	defer stg.Close()
	for _, tc := range []struct {
		path     string
		size     int64
		deferred bool
	}{{"known.bin", int64(len(data)), true}, {"unknown.bin", -1, true}, {"durable.bin", int64(len(data)), false}, {"durable-unknown.bin", -1, false}} {
		if _, err := stg.Put(ctx, tc.path, bytes.NewReader(data), tc.size, storage.PutOptions{IfAbsent: true, DeferSync: tc.deferred}); err != nil {
			t.Fatal(err)
		}
		if _, err := stg.Commit(ctx, tc.path); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(b.root, tc.path))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (%v), want the %d written", tc.path, len(got), err, len(data))
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}
