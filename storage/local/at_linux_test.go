package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// generalLog records the operations that took the general os.Root path.
type generalLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *generalLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

func newGeneralLogged(t *testing.T) (*Backend, *generalLog) {
	t.Helper()
	l := &generalLog{}
	b := testImpl{opts: []Option{withGeneralHook(func(op string) {
		l.mu.Lock()
		l.ops = append(l.ops, op)
		l.mu.Unlock()
	})}}.new(t)
	return b, l
}

// Every operation a local publication makes (serve's lock object, the
// intent, listing, outputs, the fingerprint shard, the catalog's
// compare-and-swap, a report) resolves its paths with openat2 below the
// root's handle: none walks the root with os.Root (a system call per
// component plus Go's poller set-up per file, about twice the system
// calls). A guard for the cost per publication; the general path still
// answers where openat2 refuses (a link), which the last step checks.
func TestPublicationOperationsTakeNoGeneralPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newGeneralLogged(t)
	const (
		lockObj = catalog.ReservedDir + "/lock"
		intent  = catalog.ReservedDir + "/intent.json"
		shard   = catalog.ReservedDir + "/fingerprints/1-00"
		report  = catalog.ReservedDir + "/reports/r.json"
	)
	catV, err := b.WriteIfVersion(ctx, catalog.FileName, []byte(`{"v":1}`), "")
	must(t, err)
	for round := range 2 {
		steps := []struct {
			name string
			run  func() error
		}{
			{"take the lock object", func() error {
				_, err := b.WriteIfVersion(ctx, lockObj, []byte("held"), "", storage.DeferSync)
				return err
			}},
			{"read the lock object", func() error { _, _, err := b.ReadVersion(ctx, lockObj); return err }},
			{"stat the catalog", func() error { _, err := b.Stat(ctx, catalog.FileName); return err }},
			{"stat the intent", func() error {
				if _, err := b.Stat(ctx, intent); err != nil && !errors.Is(err, storage.ErrNotExist) {
					return err
				}
				return nil
			}},
			{"read the intent", func() error { _, _, err := b.ReadVersion(ctx, intent); return err }},
			{"read a report", func() error { _, _, err := b.ReadVersion(ctx, report); return err }},
			{"read the catalog", func() error { _, _, err := b.ReadVersion(ctx, catalog.FileName); return err }},
			{"list the root", func() error { return b.List(ctx, "", func(storage.ObjectInfo) error { return nil }) }},
			{"list the reports", func() error {
				return b.List(ctx, catalog.ReservedDir+"/reports/", func(storage.ObjectInfo) error { return nil })
			}},
			{"read the shard", func() error { _, _, err := b.ReadVersion(ctx, shard); return err }},
			{"write the intent", func() error { return b.overwriteSyncIfEmpty(ctx, intent, []byte("intent")) }},
			{"stage and name outputs", func() error {
				s := b.Stage(t.Context())
				defer s.Close()
				for _, p := range []string{"report.md", "a/b/c.txt"} {
					if _, err := s.Put(ctx, p, readerSource(strings.NewReader(p)), int64(len(p)), storage.PutOptions{DeferSync: true}); err != nil {
						return err
					}
					if _, err := s.Commit(ctx, p); err != nil {
						return err
					}
				}
				return nil
			}},
			{"prepare, flush and commit the catalog", func() error {
				pv, err := b.prepareBytes(ctx, catalog.FileName, []byte(`{"v":2}`))
				if err != nil {
					return err
				}
				defer pv.Close()
				if err := b.Sync(ctx); err != nil {
					return err
				}
				catV, err = pv.CommitIfVersion(ctx, catV)
				return err
			}},
			{"empty the intent", func() error { return b.emptyDeferSyncIfBytes(ctx, intent, []byte("intent")) }},
			{"flush the emptying", func() error { return b.syncFew(ctx, []string{intent}, nil) }},
			{"write the shard", func() error { return b.Overwrite(ctx, shard, []byte("shard")) }},
			{"delete an output", func() error { return b.Delete(ctx, "a/b/c.txt") }},
			{"give the lock object back", func() error {
				_, v, err := b.ReadVersion(ctx, lockObj)
				if err != nil {
					return err
				}
				return b.DeleteIfVersion(ctx, lockObj, v, storage.DeferSync)
			}},
		}
		for _, s := range steps {
			if err := s.run(); err != nil {
				t.Fatalf("round %d, %s: %v", round, s.name, err)
			}
			if got := l.take(); len(got) != 0 {
				t.Errorf("round %d, %s: took the general path: %q", round, s.name, got)
			}
		}
	}
	// A link on the way: openat2 refuses, the general path explains.
	must(t, os.Symlink(t.TempDir(), filepath.Join(b.root, "out")))
	if _, _, err := b.ReadVersion(ctx, "out/x"); !errors.Is(err, storage.ErrSymlink) {
		t.Fatalf("ReadVersion through a link: %v, want storage.ErrSymlink", err)
	}
	if got := l.take(); !slices.Equal(got, []string{"check out/x"}) {
		t.Fatalf("through a link: general path %q, want [check out/x]", got)
	}
}

// A compare-and-swap against the content version of a large file that
// has neither a stamp nor a settled stat (just copied in, or on a file
// system without extended attributes) checks the file as it streams by:
// the check does not hold the file (a catalog of a million records is
// half a gigabyte).
func TestContentVersionCheckHoldsNotTheFile(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	b := testImpls[0].new(t)
	old := make([]byte, 32<<20)
	for i := range old {
		old[i] = byte(i % 251)
	}
	must(t, os.WriteFile(filepath.Join(b.root, "big.json"), old, 0o644))
	want := Version(old)
	next := []byte("small")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := b.WriteIfVersion(t.Context(), "big.json", next, want); err != nil {
		t.Fatalf("WriteIfVersion at the file's content version: %v", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("the check allocated %d MB for a %d MB file", got>>20, len(old)>>20)
	}
	if data, err := os.ReadFile(filepath.Join(b.root, "big.json")); err != nil || string(data) != "small" {
		t.Fatalf("after the write: %q, %v", data, err)
	}
	if _, err := b.WriteIfVersion(t.Context(), "big.json", []byte("again"), want); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a write at the replaced content's version: %v, want ErrConflict", err)
	}
}
