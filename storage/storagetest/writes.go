package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
)

// Overwrite creates a missing object and replaces an existing one's bytes
// with longer and shorter ones; each is what a reader reads, and what
// stays after a Sync.
func testPutInPlace(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	steps := [][]byte{
		[]byte("first"),
		[]byte("second, longer than the first"),
		[]byte("third"), // shorter: no tail of the second stays
		nil,
		bytes.Repeat([]byte("large "), 50_000),
		[]byte("small again"),
	}
	for i, data := range steps {
		if err := overwrite(ctx, b, "shards/s.bin", data); err != nil {
			t.Fatalf("Overwrite #%d: %v", i, err)
		}
		wantContent(t, b, "shards/s.bin", data)
		if oi, err := b.Stat(ctx, "shards/s.bin"); err != nil || oi.Size != int64(len(data)) {
			t.Fatalf("Stat after Overwrite #%d = %+v, %v; want size %d", i, oi, err, len(data))
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantContent(t, b, "shards/s.bin", steps[len(steps)-1])

	// Over an object Put wrote, and in a new folder.
	put(t, b, "p.txt", []byte("put by Put, longer"))
	if err := overwrite(ctx, b, "p.txt", []byte("overwritten")); err != nil {
		t.Fatal(err)
	}
	if err := overwrite(ctx, b, "new/deep/o.txt", []byte("created")); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantContent(t, b, "p.txt", []byte("overwritten"))
	wantContent(t, b, "new/deep/o.txt", []byte("created"))
	wantPaths(t, b, "", "new/deep/o.txt", "p.txt", "shards/s.bin")

	// Versions see an overwrite: the old one is stale.
	_, v, err := b.ReadVersion(ctx, "p.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := overwrite(ctx, b, "p.txt", []byte("overwritten again")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteIfVersion(ctx, "p.txt", []byte("stale"), v); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion at the version before an Overwrite: %v, want ErrConflict", err)
	}
	wantContent(t, b, "p.txt", []byte("overwritten again"))
}

// Sync makes what the deferred writes wrote durable: it succeeds, on a
// fresh root and after Puts with DeferSync, Overwrites and staged writes,
// and every object is whole afterwards.
func testSync(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync on a fresh root: %v", err)
	}
	want := map[string]string{}
	for i := range 20 {
		p := fmt.Sprintf("d%d/f%02d.txt", i%3, i)
		want[p] = strings.Repeat(p, i+1)
		if _, err := b.Put(ctx, p, strings.NewReader(want[p]), int64(len(want[p])), storage.PutOptions{DeferSync: true, IfAbsent: i%2 == 0}); err != nil {
			t.Fatalf("Put %s: %v", p, err)
		}
	}
	for _, p := range []string{"d0/f00.txt", "o/new.txt"} {
		want[p] = "overwritten " + p
		if err := overwrite(ctx, b, p, []byte(want[p])); err != nil {
			t.Fatalf("Overwrite %s: %v", p, err)
		}
	}
	st := b.Stage(ctx)
	want["staged/s.txt"] = "staged"
	stagePut(t, st, "staged/s.txt", want["staged/s.txt"], storage.PutOptions{IfAbsent: true, DeferSync: true})
	if _, err := st.Commit(ctx, "staged/s.txt"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync again: %v", err)
	}
	var paths []string
	for p, data := range want {
		wantContent(t, b, p, []byte(data))
		paths = append(paths, p)
	}
	slices.Sort(paths)
	wantPaths(t, b, "", paths...)
}

// checkRoot checks that CheckRoot finds the root as it was.
func checkRoot(t *testing.T, b storage.Backend) {
	t.Helper()
	if err := b.CheckRoot(t.Context()); err != nil {
		t.Fatalf("CheckRoot on a healthy root: %v", err)
	}
}

// CheckRoot is nil on a healthy root, fresh or written to.
func testCheckRoot(t *testing.T, b storage.Backend) {
	checkRoot(t, b)
	put(t, b, "a/b.txt", []byte("b"))
	if _, err := b.WriteIfVersion(t.Context(), "c.json", []byte("c"), ""); err != nil {
		t.Fatal(err)
	}
	checkRoot(t, b)
	if err := b.Delete(t.Context(), "a/b.txt"); err != nil {
		t.Fatal(err)
	}
	checkRoot(t, b)
}

// casOps are the compare-and-swap writes of one durability.
type casOps struct {
	write func(b storage.Backend, t *testing.T, path string, data []byte, want storage.Version) (storage.Version, error)
	del   func(b storage.Backend, t *testing.T, path string, want storage.Version) error
}

var (
	synced = casOps{
		write: func(b storage.Backend, t *testing.T, p string, data []byte, want storage.Version) (storage.Version, error) {
			return b.WriteIfVersion(t.Context(), p, data, want)
		},
		del: func(b storage.Backend, t *testing.T, p string, want storage.Version) error {
			return b.DeleteIfVersion(t.Context(), p, want)
		},
	}
	noSync = casOps{
		write: func(b storage.Backend, t *testing.T, p string, data []byte, want storage.Version) (storage.Version, error) {
			return b.WriteIfVersion(t.Context(), p, data, want, storage.DeferSync)
		},
		del: func(b storage.Backend, t *testing.T, p string, want storage.Version) error {
			return b.DeleteIfVersion(t.Context(), p, want, storage.DeferSync)
		},
	}
)

// WriteIfVersion with DeferSync has WriteIfVersion's conditions: "" creates only,
// a stale version loses, and a lost write changes nothing.
func testWriteIfVersionDeferSync(t *testing.T, b storage.Backend) {
	w := noSync.write
	v1, err := w(b, t, "lock", []byte("one"), "")
	if err != nil || v1 == "" {
		t.Fatalf("create: %q, %v; want a version", v1, err)
	}
	if _, err := w(b, t, "lock", []byte("two"), ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create over an object: %v, want ErrConflict", err)
	}
	wantVersion(t, b, "lock", []byte("one"), v1)
	v2, err := w(b, t, "lock", []byte("two"), v1)
	if err != nil || v2 == "" || v2 == v1 {
		t.Fatalf("write at the current version: %q, %v; want a new version (was %q)", v2, err, v1)
	}
	wantVersion(t, b, "lock", []byte("two"), v2)
	if _, err := w(b, t, "lock", []byte("three"), v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("write at a stale version: %v, want ErrConflict", err)
	}
	wantVersion(t, b, "lock", []byte("two"), v2)
	if _, err := w(b, t, "absent", []byte("x"), v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("write of a missing object at some version: %v, want ErrConflict", err)
	}
	wantMissing(t, b, "absent")
	put(t, b, "lock", []byte("changed by someone else"))
	if _, err := w(b, t, "lock", []byte("mine"), v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("write after a foreign Put: %v, want ErrConflict", err)
	}
	wantContent(t, b, "lock", []byte("changed by someone else"))
	if _, err := w(b, t, "new/dir/lock", []byte("n"), ""); err != nil {
		t.Fatalf("create in a new folder: %v", err)
	}
	wantPaths(t, b, "", "lock", "new/dir/lock")
}

// DeleteIfVersion with DeferSync has DeleteIfVersion's conditions.
func testDeleteIfVersionDeferSync(t *testing.T, b storage.Backend) {
	testDeleteIfVersionOf(t, b, noSync)
}

// testDeleteIfVersionOf: a stale version or "" (no object) does not
// delete an object; the current one does; a gone object is no version.
func testDeleteIfVersionOf(t *testing.T, b storage.Backend, ops casOps) {
	v1, err := ops.write(b, t, "lock", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := ops.write(b, t, "lock", []byte("two"), v1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.del(b, t, "lock", v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete at a stale version: %v, want ErrConflict", err)
	}
	if err := ops.del(b, t, "lock", ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete of an object at \"\" (no object): %v, want ErrConflict", err)
	}
	wantVersion(t, b, "lock", []byte("two"), v2)
	if err := ops.del(b, t, "lock", v2); err != nil {
		t.Fatalf("delete at the current version: %v", err)
	}
	wantMissing(t, b, "lock")
	if err := ops.del(b, t, "lock", v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete of a deleted object: %v, want ErrConflict", err)
	}
	if err := ops.del(b, t, "lock", ""); err != nil {
		t.Fatalf("delete of a missing object at \"\" (no object): %v, want nil", err)
	}

	// A Put object's version, in nested folders.
	put(t, b, "d/e/f", []byte("f"))
	_, v, err := b.ReadVersion(t.Context(), "d/e/f")
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "d/e/f", []byte("g"))
	if err := ops.del(b, t, "d/e/f", v); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete after a foreign Put: %v, want ErrConflict", err)
	}
	wantContent(t, b, "d/e/f", []byte("g"))
	_, v, err = b.ReadVersion(t.Context(), "d/e/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.del(b, t, "d/e/f", v); err != nil {
		t.Fatalf("delete of a Put object at its version: %v", err)
	}
	wantPaths(t, b, "")
}

// The versions of both durabilities are one kind: either write's version
// is what ReadVersion returns, and what the other takes.
func testDeferSyncVersionsAreVersions(t *testing.T, b storage.Backend) {
	v1, err := b.WriteIfVersion(t.Context(), "x.json", []byte("one"), "", storage.DeferSync)
	if err != nil {
		t.Fatal(err)
	}
	wantVersion(t, b, "x.json", []byte("one"), v1)
	v2, err := b.WriteIfVersion(t.Context(), "x.json", []byte("two"), v1)
	if err != nil {
		t.Fatalf("WriteIfVersion at WriteIfVersion with DeferSync's version: %v", err)
	}
	v3, err := b.WriteIfVersion(t.Context(), "x.json", []byte("three"), v2, storage.DeferSync)
	if err != nil {
		t.Fatalf("WriteIfVersion with DeferSync at WriteIfVersion's version: %v", err)
	}
	wantVersion(t, b, "x.json", []byte("three"), v3)
	if err := b.DeleteIfVersion(t.Context(), "x.json", v3); err != nil {
		t.Fatalf("DeleteIfVersion at WriteIfVersion with DeferSync's version: %v", err)
	}
	v4, err := b.WriteIfVersion(t.Context(), "x.json", []byte("four"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteIfVersion(t.Context(), "x.json", v4, storage.DeferSync); err != nil {
		t.Fatalf("DeleteIfVersion with DeferSync at WriteIfVersion's version: %v", err)
	}
	wantMissing(t, b, "x.json")
	if err := b.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantPaths(t, b, "")
}

// wantVersion checks ReadVersion of path.
func wantVersion(t *testing.T, b storage.Backend, path string, data []byte, v storage.Version) {
	t.Helper()
	got, gotV, err := b.ReadVersion(t.Context(), path)
	if err != nil || !bytes.Equal(got, data) || gotV != v {
		t.Fatalf("ReadVersion(%q) = %q, %q, %v; want %q, %q", path, abbrev(got), gotV, err, abbrev(data), v)
	}
}
