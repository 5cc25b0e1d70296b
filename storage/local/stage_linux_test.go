package local

import (
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

// The stage contract on Linux's fallbacks: with temp names once the
// unnamed-file share is used up, and on a filesystem without O_TMPFILE.
func TestStagerContractFallbacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tune func(b *Backend)
	}{
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

// Past the unnamed-file share, a stage closed without commits leaves the
// root as it was too.
func TestStageCloseWithTempNamesLeavesTheTreeAsItWas(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	b.maxUnnamed = 0
	stageCloseLeavesTheTree(t, b)
}

// A Delete that removes a folder emptied meanwhile (an unnamed file gives
// its folder no entry) does not fail a staged
// write into it: its Commit makes the folder again.
func TestStageCommitAfterItsFolderWasRemoved(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	st := b.Stage(t.Context())
	defer st.Close()
	if _, err := st.Put(ctx, "d/e/new.txt", readerSource(strings.NewReader("new")), 3, storage.PutOptions{IfAbsent: true}); err != nil {
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

// Past the unnamed-file share, staged writes take temp names: never
// listed, and gone after Close.
func TestStagePastTheUnnamedShareUsesTempNames(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	b.maxUnnamed = 1
	ctx := t.Context()
	st := b.Stage(t.Context())
	for _, p := range []string{"a.txt", "b.txt", "c.txt"} {
		if _, err := st.Put(ctx, p, readerSource(strings.NewReader(p)), int64(len(p)), storage.PutOptions{IfAbsent: true}); err != nil {
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

// TestStageLargeDeferredObjects writes across Linux's writeback chunks.
func TestLargeChunkIsWritebackChunk(t *testing.T) {
	if largeChunk != writebackChunk {
		t.Fatalf("largeChunk = %d, writebackChunk = %d", largeChunk, writebackChunk)
	}
}
