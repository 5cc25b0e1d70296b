package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/distributor/distributor/storage"
)

// The intent's file is created durably once (the file, its folder and the
// new folder's entry), then rewritten in place with one flush of the file
// and none of its folder, emptied without a flush, and the emptying made
// durable with one flush of the file; with openat2 and without.
func TestInPlaceRewriteFlushesTheFileOnly(t *testing.T) {
	t.Parallel()
	withAndWithoutOpenat2(t, func(t *testing.T, general bool) {
		inPlaceRewrite(t, general)
	})
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
		{"create", func() error { return b.OverwriteSync(ctx, p, []byte("first, longer")) }, "first, longer",
			[]string{"file .distributor", "folder .", "folder .distributor"}},
		{"rewrite shorter", func() error { return b.OverwriteSync(ctx, p, []byte("second")) }, "second", []string{"file .distributor"}},
		{"empty", func() error { return b.EmptyDeferSync(ctx, p) }, "", nil},
		{"sync the emptying", func() error { return b.SyncEmptied(ctx, p) }, "", []string{"file .distributor"}},
		{"rewrite into the empty file", func() error { return b.OverwriteSync(ctx, p, []byte("third")) }, "third", []string{"file .distributor"}},
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
	if err := b.EmptyDeferSync(ctx, "missing.json"); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncEmptied(ctx, "missing.json"); err != nil {
		t.Fatal(err)
	}
}

// A link where the file goes, or on its way, is refused, never written
// through; with openat2 and without.
func TestInPlaceRewriteRefusesALink(t *testing.T) {
	t.Parallel()
	withAndWithoutOpenat2(t, func(t *testing.T, general bool) {
		inPlaceRefusesLinks(t, general)
	})
}

func inPlaceRefusesLinks(t *testing.T, general bool) {
	ctx := context.Background()
	b, _ := newSyncLogged(t)
	b.noOpenat2.Store(general)
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(b.root, "intent.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(b.root, "dir")); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"overwrite":                  func() error { return b.OverwriteSync(ctx, "intent.json", []byte("x")) },
		"empty":                      func() error { return b.EmptyDeferSync(ctx, "intent.json") },
		"sync":                       func() error { return b.SyncEmptied(ctx, "intent.json") },
		"overwrite unsynced":         func() error { return b.Overwrite(ctx, "intent.json", []byte("x")) },
		"overwrite if empty":         func() error { return b.OverwriteSyncIfEmpty(ctx, "intent.json", []byte("x")) },
		"empty if":                   func() error { return b.EmptyDeferSyncIf(ctx, "intent.json", []byte("keep")) },
		"empty if through a folder":  func() error { return b.EmptyDeferSyncIf(ctx, "dir/target", []byte("keep")) },
		"overwrite through a folder": func() error { return b.OverwriteSync(ctx, "dir/target", []byte("x")) },
		"unsynced through a folder":  func() error { return b.Overwrite(ctx, "dir/target", []byte("x")) },
		"empty through a folder":     func() error { return b.EmptyDeferSync(ctx, "dir/target") },
	} {
		if err := run(); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("%s through a link: %v, want it refused", name, err)
		}
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Fatalf("the link's target changed to %q", data)
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

// OverwriteSyncIfEmpty writes only over an empty or missing file (a
// missing one created durably, only where nothing is), and
// EmptyDeferSyncIf empties only a file holding exactly the bytes given:
// otherwise ErrConflict and the file as it was; with openat2 and without.
func TestInPlaceCheckedRewrite(t *testing.T) {
	t.Parallel()
	withAndWithoutOpenat2(t, func(t *testing.T, general bool) {
		ctx := context.Background()
		b, l := newSyncLogged(t)
		b.noOpenat2.Store(general)
		const p = ".distributor/intent.json"
		full := filepath.Join(b.root, filepath.FromSlash(p))
		holds := func(step, want string) {
			t.Helper()
			if data, err := os.ReadFile(full); err != nil || string(data) != want {
				t.Fatalf("%s: file holds %q (%v), want %q", step, data, err, want)
			}
		}
		conflict := func(step string, err error) {
			t.Helper()
			if !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("%s: %v, want ErrConflict", step, err)
			}
		}
		conflict("empty a missing file", b.EmptyDeferSyncIf(ctx, p, []byte("mine")))
		if err := b.OverwriteSyncIfEmpty(ctx, p, []byte("mine, long")); err != nil {
			t.Fatal(err)
		}
		holds("created", "mine, long")
		if got, want := l.take(), []string{"file .distributor", "folder .", "folder .distributor"}; !slices.Equal(got, want) {
			t.Fatalf("created: synced %q, want %q", got, want)
		}
		conflict("write over another run's", b.OverwriteSyncIfEmpty(ctx, p, []byte("theirs")))
		holds("not written over", "mine, long")
		conflict("empty other bytes", b.EmptyDeferSyncIf(ctx, p, []byte("mine")))
		holds("not emptied", "mine, long")
		if err := b.EmptyDeferSyncIf(ctx, p, []byte("mine, long")); err != nil {
			t.Fatal(err)
		}
		holds("emptied", "")
		if err := b.OverwriteSyncIfEmpty(ctx, p, []byte("next")); err != nil {
			t.Fatal(err)
		}
		holds("rewritten in place", "next")
		if got, want := l.take(), []string{"file .distributor"}; !slices.Equal(got, want) {
			t.Fatalf("rewritten: synced %q, want %q (the file only)", got, want)
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
