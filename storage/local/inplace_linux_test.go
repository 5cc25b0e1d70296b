package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// The intent's file is created durably once (the file, its folder and the
// new folder's entry), then rewritten in place with one flush of the file
// and none of its folder, emptied without a flush, and the emptying made
// durable with one flush of the file; with openat2 and without.
func TestInPlaceRewriteFlushesTheFileOnly(t *testing.T) {
	t.Parallel()
	withAndWithoutOpenat2(t, inPlaceRewrite)
}

func inPlaceRewrite(t *testing.T, general bool) {
	ctx := context.Background()
	b, l := newSyncLogged(t)
	b.noOpenat2.Store(general)
	const p = ".distributor/intent.json"
	read := func() string {
		data, err := os.ReadFile(filepath.Join(b.root, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	steps := []struct {
		name    string
		run     func() error
		content string
		synced  []string
	}{
		{"create", func() error { return b.overwriteSync(ctx, p, []byte("first, longer")) }, "first, longer",
			[]string{"file .distributor", "folder .", "folder .distributor"}},
		{"rewrite shorter", func() error { return b.overwriteSync(ctx, p, []byte("second")) }, "second", []string{"file .distributor"}},
		{"empty", func() error { return b.emptyDeferSync(ctx, p) }, "", nil},
		{"sync the emptying", func() error { return b.syncFew(ctx, []string{p}, nil) }, "", []string{"file .distributor"}},
		{"rewrite into the empty file", func() error { return b.overwriteSync(ctx, p, []byte("third")) }, "third", []string{"file .distributor"}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := read(); got != s.content {
			t.Fatalf("%s: file holds %q, want %q", s.name, got, s.content)
		}
		if got := l.take(); !slices.Equal(got, s.synced) {
			t.Fatalf("%s: synced %q, want %q", s.name, got, s.synced)
		}
	}
	// Emptying or syncing a missing file is nothing.
	if err := b.emptyDeferSync(ctx, "missing.json"); err != nil {
		t.Fatal(err)
	}
	if err := b.syncFew(ctx, []string{"missing.json"}, nil); err != nil {
		t.Fatal(err)
	}
}

// Overwrite (storage.Overwriter) creates a missing file whole, then
// rewrites it in place: the same inode, no temp file, no flush; with
// openat2 and without.
func TestOverwriteRewritesInPlaceWithoutAFlush(t *testing.T) {
	t.Parallel()
	withAndWithoutOpenat2(t, func(t *testing.T, general bool) {
		ctx := context.Background()
		b, l := newSyncLogged(t)
		b.noOpenat2.Store(general)
		const p = ".distributor/fingerprints/1-00"
		full := filepath.Join(b.root, filepath.FromSlash(p))
		var ino uint64
		for i, content := range []string{"first, longer", "second", "third, longest of all"} {
			if err := b.Overwrite(ctx, p, []byte(content)); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			data, err := os.ReadFile(full)
			if err != nil || string(data) != content {
				t.Fatalf("write %d: file holds %q (%v), want %q", i, data, err, content)
			}
			fi, err := os.Stat(full)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); i == 0 {
				ino = st.Ino
			} else if st.Ino != ino {
				t.Fatalf("write %d: inode %d, want %d (rewritten in place)", i, st.Ino, ino)
			}
			if got := l.take(); len(got) != 0 {
				t.Fatalf("write %d: synced %q, want no flush", i, got)
			}
			entries, err := os.ReadDir(filepath.Dir(full))
			if err != nil || len(entries) != 1 {
				t.Fatalf("write %d: folder holds %v (%v), want the file alone", i, entries, err)
			}
		}
	})
}

// withAndWithoutOpenat2 runs fn in parallel subtests on the openat2 path
// (general false) and on the general os.Root one (general true).
func withAndWithoutOpenat2(t *testing.T, fn func(t *testing.T, general bool)) {
	for _, general := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "general"}[general], func(t *testing.T) {
			t.Parallel()
			fn(t, general)
		})
	}
}
