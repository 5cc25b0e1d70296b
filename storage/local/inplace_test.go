package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/distributor/distributor/storage"
)

// A link where the file goes, or on its way, is refused, never written
// through; on every path (eachPath).
func TestInPlaceRewriteRefusesALink(t *testing.T) {
	t.Parallel()
	eachPath(t, func(t *testing.T, b *Backend, _ *syncLog) { inPlaceRefusesLinks(t, b) })
}

func inPlaceRefusesLinks(t *testing.T, b *Backend) {
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(b.root, "intent.json"))
	symlink(t, filepath.Dir(outside), filepath.Join(b.root, "dir"))
	for name, run := range map[string]func() error{
		"overwrite":                  func() error { return b.overwriteSync(ctx, "intent.json", []byte("x")) },
		"empty":                      func() error { return b.emptyDeferSync(ctx, "intent.json") },
		"sync":                       func() error { return b.syncFew(ctx, []string{"intent.json"}, nil) },
		"overwrite unsynced":         func() error { return b.Overwrite(ctx, "intent.json", []byte("x")) },
		"overwrite if empty":         func() error { return b.overwriteSyncIfEmpty(ctx, "intent.json", []byte("x")) },
		"empty if":                   func() error { return b.emptyDeferSyncIfBytes(ctx, "intent.json", []byte("keep")) },
		"empty if through a folder":  func() error { return b.emptyDeferSyncIfBytes(ctx, "dir/target", []byte("keep")) },
		"overwrite through a folder": func() error { return b.overwriteSync(ctx, "dir/target", []byte("x")) },
		"unsynced through a folder":  func() error { return b.Overwrite(ctx, "dir/target", []byte("x")) },
		"empty through a folder":     func() error { return b.emptyDeferSync(ctx, "dir/target") },
	} {
		if err := run(); !errors.Is(err, storage.ErrSymlink) {
			t.Errorf("%s through a link: %v, want it refused", name, err)
		}
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Fatalf("the link's target changed to %q", data)
	}
}

// overwriteSyncIfEmpty writes only over an empty or missing file (a
// missing one created durably, only where nothing is), and
// emptyDeferSyncIfBytes empties only a file holding exactly the bytes given:
// otherwise ErrConflict and the file as it was; on every path. Linux
// flushes the new file and folders, then the rewritten file only.
func TestInPlaceCheckedRewrite(t *testing.T) {
	t.Parallel()
	eachPath(t, func(t *testing.T, b *Backend, l *syncLog) {
		ctx := context.Background()
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
		conflict("empty a missing file", b.emptyDeferSyncIfBytes(ctx, p, []byte("mine")))
		if err := b.overwriteSyncIfEmpty(ctx, p, []byte("mine, long")); err != nil {
			t.Fatal(err)
		}
		holds("created", "mine, long")
		if got, want := l.take(), []string{"file .distributor", "folder .", "folder .distributor"}; !b.portable && !slices.Equal(got, want) {
			t.Fatalf("created: synced %q, want %q", got, want)
		}
		conflict("write over another run's", b.overwriteSyncIfEmpty(ctx, p, []byte("theirs")))
		holds("not written over", "mine, long")
		conflict("empty other bytes", b.emptyDeferSyncIfBytes(ctx, p, []byte("mine")))
		holds("not emptied", "mine, long")
		if err := b.emptyDeferSyncIfBytes(ctx, p, []byte("mine, long")); err != nil {
			t.Fatal(err)
		}
		holds("emptied", "")
		if err := b.overwriteSyncIfEmpty(ctx, p, []byte("next")); err != nil {
			t.Fatal(err)
		}
		holds("rewritten in place", "next")
		if got, want := l.take(), []string{"file .distributor"}; !b.portable && !slices.Equal(got, want) {
			t.Fatalf("rewritten: synced %q, want %q (the file only)", got, want)
		}
	})
}

// eachPath runs fn in parallel subtests on every way a backend here
// reaches files: each implementation and, on Linux, the general path of
// its own (generalPaths); each backend's fsyncs are logged.
func eachPath(t *testing.T, fn func(t *testing.T, b *Backend, l *syncLog)) {
	for _, ti := range testImpls {
		t.Run(ti.name, func(t *testing.T) {
			t.Parallel()
			b, l := newSyncLogged(t, ti.opts...)
			fn(t, b, l)
		})
	}
	for name, tune := range generalPaths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, l := newSyncLogged(t)
			tune(b)
			fn(t, b, l)
		})
	}
}
