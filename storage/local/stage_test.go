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

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
)

// The stage contract holds for each implementation.
func TestStagerContract(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) {
		storagetest.RunStager(t, func(t *testing.T) storage.Backend { return ti.new(t) })
	})
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
	eachImpl(t, func(t *testing.T, ti testImpl) { stageCloseLeavesTheTree(t, ti.new(t)) })
}

func stageCloseLeavesTheTree(t *testing.T, b *Backend) {
	ctx := t.Context()
	must(t, os.MkdirAll(filepath.Join(b.root, "kept/empty"), 0o755))
	before := tree(t, b.root)
	st := b.Stage(t.Context())
	for _, p := range []string{"kept/empty/a.txt", "kept/new/deep/b.txt", "fresh/c.txt", "d.txt"} {
		if _, err := st.Put(ctx, p, readerSource(strings.NewReader("x")), 1, storage.PutOptions{IfAbsent: true}); err != nil {
			t.Fatal(err)
		}
	}
	must(t, st.Close())
	if got := tree(t, b.root); !slices.Equal(got, before) {
		t.Errorf("tree after Close = %q, want %q", got, before)
	}
}

// A stage never writes through a symlinked folder, even one that appears
// after the root was opened, and never names an object onto a link.
func TestStageRefusesSymlinks(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { stageRefusesSymlinks(t, ti.new(t)) })
}

func stageRefusesSymlinks(t *testing.T, b *Backend) {
	ctx := t.Context()
	outside := t.TempDir()
	symlink(t, outside, filepath.Join(b.root, "out"))
	must(t, os.Mkdir(filepath.Join(b.root, "real"), 0o755))
	symlink(t, filepath.Join(outside, "secret"), filepath.Join(b.root, "real", "link"))
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
		if _, err := st.Put(ctx, tc.p, readerSource(strings.NewReader("pwned")), 5, tc.opts); !errors.Is(err, storage.ErrSymlink) {
			t.Errorf("stage Put %s: err = %v, want storage.ErrSymlink", tc.p, err)
		}
	}
	// A new path staged before a link took its place is not named onto it.
	if _, err := st.Put(ctx, "real/late", readerSource(strings.NewReader("pwned")), 5, storage.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(outside, "secret"), filepath.Join(b.root, "real", "late"))
	if _, err := st.Commit(ctx, "real/late"); !errors.Is(err, storage.ErrSymlink) {
		t.Errorf("Commit onto a link: err = %v, want storage.ErrSymlink", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside the root: %v", ents)
	}
}

// Large deferred objects start their writeback while written (Linux:
// every writebackChunk bytes), durable ones every durableChunk bytes: the
// bytes named are exactly the bytes given, of a known size or not, across
// chunk boundaries.
func TestStageLargeDeferredObjects(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { stageLargeObjects(t, ti.new(t)) })
}

// largeChunk is writebackChunk (Linux), the largest chunk of a stage's
// writes.
const largeChunk = 8 << 20

func stageLargeObjects(t *testing.T, b *Backend) {
	ctx := t.Context()
	data := make([]byte, 2*largeChunk+12345)
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
		if _, err := stg.Put(ctx, tc.path, readerSource(bytes.NewReader(data)), tc.size, storage.PutOptions{IfAbsent: true, DeferSync: tc.deferred}); err != nil {
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
