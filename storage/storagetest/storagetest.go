// Package storagetest is the one contract suite every storage.Backend must
// pass. A backend's own tests call RunAll with a constructor for a fresh,
// empty root and a way to interrupt a write; the suite then checks every
// method of storage.Backend, storage.Stage and storage.PendingCatalog
// against the MUST-contract in their comments. Run, RunStager and
// RunLeftovers run the parts of it, for a backend's variants that need
// only one part checked again.
package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// RunAll runs the whole suite against a backend: Run, RunStager and
// RunLeftovers. newBackend must return a fresh, empty root for each call
// (it is called once per subtest, with the subtest's t, possibly
// concurrently); interrupt is RunLeftovers'.
func RunAll(t *testing.T, newBackend func(t *testing.T) storage.Backend, interrupt Interrupt) {
	t.Run("Backend", func(t *testing.T) {
		t.Parallel()
		Run(t, newBackend)
	})
	t.Run("Stage", func(t *testing.T) {
		t.Parallel()
		RunStager(t, newBackend)
	})
	t.Run("Leftovers", func(t *testing.T) {
		t.Parallel()
		RunLeftovers(t, newBackend, interrupt)
	})
}

// Run checks the methods of storage.Backend but Stage, Leftovers and
// RemoveLeftovers (RunStager, RunLeftovers), and storage.PendingCatalog,
// each case on a root of its own, in parallel. newBackend must return a
// fresh, empty root for each call (it is called once per subtest, with
// the subtest's t, possibly concurrently).
func Run(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend)
	}{
		// Stat, Open (its size), List, Put, Delete.
		{"RoundTrip", testRoundTrip},
		{"UnknownSize", testUnknownSize},
		{"OpenKnowsItsSize", testOpenKnowsItsSize},
		{"EmptyFile", testEmptyFile},
		{"SpacesAndUnicode", testSpacesAndUnicode},
		{"Missing", testMissing},
		{"FoldersAreNotObjects", testFoldersAreNotObjects},
		{"InvalidPaths", testInvalidPaths},
		{"AtomicReplace", testAtomicReplace},
		{"FailingReader", testFailingReader},
		{"CancelledBeforePut", testCancelledBeforePut},
		{"CancelledDuringPut", testCancelledDuringPut},
		{"Metadata", testMetadata},
		{"Delete", testDelete},
		{"ListOrder", testListOrder},
		{"ListPrefix", testListPrefix},
		{"ListStopsOnError", testListStopsOnError},
		{"ManyKeys", testManyKeys},
		{"Large", testLarge},
		{"Fingerprint", testFingerprint},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfMatch", testPutIfMatch},
		// Find.
		{"FindEverything", testFindEverything},
		{"FindPaths", testFindPaths},
		{"FindManyPaths", testFindManyPaths},
		{"FindObjectAndObjectsUnderIt", testFindObjectAndObjectsUnder},
		{"FindCancelled", testFindCancelled},
		{"FindStopsOnError", testFindStopsOnError},
		// ReadVersion, WriteIfVersion, DeleteIfVersion, with DeferSync too.
		{"CreateIfAbsent", testCreateIfAbsent},
		{"WriteIfVersion", testWriteIfVersion},
		{"ConcurrentWriteIfVersion", testConcurrentWriteIfVersion},
		{"LargeVersionsInQuickSuccession", testLargeVersionsInQuickSuccession},
		{"LargeReadModifyWriteRace", testLargeReadModifyWriteRace},
		{"DeleteIfVersion", testDeleteIfVersion},
		{"WriteIfVersionDeferSync", testWriteIfVersionDeferSync},
		{"DeleteIfVersionDeferSync", testDeleteIfVersionDeferSync},
		{"DeferSyncVersionsAreVersions", testDeferSyncVersionsAreVersions},
		{"OpenVersioned", testOpenVersioned},
		// Put InPlace, Sync, CheckRoot.
		{"PutInPlace", testPutInPlace},
		{"Sync", testSync},
		{"CheckRoot", testCheckRoot},
		// The intent: compare-and-swap InPlace; Properties.
		{"Intent", testIntent},
		{"IntentRace", testIntentRace},
		{"IntentWhole", testIntentWhole},
		// PrepareCatalog and PendingCatalog; every way of driving them:
		// runCatalog, after these.
		{"CatalogRace", testCatalogRace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own root; their waits (fsyncs, requests)
			// overlap.
			t.Parallel()
			b := newBackend(t)
			if b.String() == "" {
				t.Fatal("String() is empty; it must name the root")
			}
			tc.fn(t, b)
		})
	}
	runCatalog(t, newBackend)
}

func put(t *testing.T, b storage.Backend, path string, data []byte) {
	t.Helper()
	if _, err := b.Put(t.Context(), path, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		t.Fatalf("Put(%q): %v", path, err)
	}
}

func get(t *testing.T, b storage.Backend, path string) []byte {
	t.Helper()
	rc, err := b.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", path, err)
	}
	return data
}

// list returns what List reports, less distributor's reserved paths (such as
// a local backend's lock file), which callers filter out themselves.
func list(t *testing.T, b storage.Backend, prefix string) []storage.ObjectInfo {
	t.Helper()
	var got []storage.ObjectInfo
	err := b.List(t.Context(), prefix, func(oi storage.ObjectInfo) error {
		if !catalog.IsReserved(oi.Path) {
			got = append(got, oi)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func listPaths(t *testing.T, b storage.Backend, prefix string) []string {
	t.Helper()
	var paths []string
	for _, oi := range list(t, b, prefix) {
		paths = append(paths, oi.Path)
	}
	return paths
}

func wantPaths(t *testing.T, b storage.Backend, prefix string, want ...string) {
	t.Helper()
	got := listPaths(t, b, prefix)
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
}

func wantContent(t *testing.T, b storage.Backend, path string, want []byte) {
	t.Helper()
	if got := get(t, b, path); !bytes.Equal(got, want) {
		t.Fatalf("content of %q = %q, want %q", path, abbrev(got), abbrev(want))
	}
}

func wantMissing(t *testing.T, b storage.Backend, path string) {
	t.Helper()
	if _, err := b.Stat(t.Context(), path); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat(%q) error = %v, want ErrNotExist", path, err)
	}
	rc, err := b.Open(t.Context(), path)
	if err == nil {
		rc.Close()
	}
	if !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Open(%q) error = %v, want ErrNotExist", path, err)
	}
}

func abbrev(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%s... (%d bytes)", b[:40], len(b))
	}
	return string(b)
}

func testRoundTrip(t *testing.T, b storage.Backend) {
	data := []byte("hello, distributor\n")
	before := time.Now().Add(-time.Minute)
	put(t, b, "a/b/c.txt", data)
	oi, err := b.Stat(t.Context(), "a/b/c.txt")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if oi.Path != "a/b/c.txt" || oi.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, want path a/b/c.txt size %d", oi, len(data))
	}
	if oi.ModTime.Before(before) || oi.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Stat ModTime = %v, want about now", oi.ModTime)
	}
	wantContent(t, b, "a/b/c.txt", data)

	// Overwrite with shorter content: no stale tail.
	put(t, b, "a/b/c.txt", []byte("hi"))
	wantContent(t, b, "a/b/c.txt", []byte("hi"))
	wantPaths(t, b, "", "a/b/c.txt")
}

func testUnknownSize(t *testing.T, b storage.Backend) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160,000 bytes

	// A reader that is not a *bytes.Reader, so no backend can learn the size.
	r := io.MultiReader(bytes.NewReader(data[:1000]), bytes.NewReader(data[1000:]))
	if _, err := b.Put(t.Context(), "unknown", r, -1, storage.PutOptions{}); err != nil {
		t.Fatalf("Put with size -1: %v", err)
	}
	oi, err := b.Stat(t.Context(), "unknown")
	if err != nil || oi.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, %v; want size %d", oi, err, len(data))
	}
	wantContent(t, b, "unknown", data)
}

// testOpenKnowsItsSize: every backend's Open reports the object's size
// (storage.Reader.Size), which the manifest's reader sizes its buffer by; without
// it a 10,000-file manifest was copied several times while it grew.
func testOpenKnowsItsSize(t *testing.T, b storage.Backend) {
	for _, data := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("abc"), 100_000)} {
		put(t, b, "sized", data)
		rc, err := b.Open(t.Context(), "sized")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if got := rc.Size; got != int64(len(data)) {
			t.Errorf("Size = %d, want %d", got, len(data))
		}

		// Reading does not change it: it is the size when opened.
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatalf("read: %v", err)
		}
		if got := rc.Size; got != int64(len(data)) {
			t.Errorf("Size after reading = %d, want %d", got, len(data))
		}
		rc.Close()
	}
}

func testEmptyFile(t *testing.T, b storage.Backend) {
	put(t, b, "empty", nil)
	oi, err := b.Stat(t.Context(), "empty")
	if err != nil || oi.Size != 0 {
		t.Fatalf("Stat = %+v, %v; want size 0", oi, err)
	}
	wantContent(t, b, "empty", []byte{})
	got := list(t, b, "")
	if len(got) != 1 || got[0].Path != "empty" || got[0].Size != 0 {
		t.Fatalf("List = %+v, want one empty object", got)
	}
}

func testSpacesAndUnicode(t *testing.T, b storage.Backend) {
	paths := []string{"dir with space/file name.txt", "naïve/日本語 ファイル.md", "emoji/🚀+plus&amp=eq%25.txt"}
	for i, p := range paths {
		put(t, b, p, []byte(fmt.Sprint("content ", i)))
	}
	for i, p := range paths {
		wantContent(t, b, p, []byte(fmt.Sprint("content ", i)))
	}
	want := slices.Clone(paths)
	sort.Strings(want)
	wantPaths(t, b, "", want...)
	wantPaths(t, b, "naïve/", "naïve/日本語 ファイル.md")
	if err := b.Delete(t.Context(), paths...); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantPaths(t, b, "")
}

func testMissing(t *testing.T, b storage.Backend) {
	wantMissing(t, b, "nope")
	wantMissing(t, b, "no/such/folder/file")
	put(t, b, "x/present", []byte("x"))
	wantMissing(t, b, "x/absent")
	if data, v, err := b.ReadVersion(t.Context(), "nope"); data != nil || v != "" || err != nil {
		t.Fatalf("ReadVersion(missing) = %q, %q, %v; want nil, \"\", nil", data, v, err)
	}
	wantPaths(t, b, "no/")
}

func testFoldersAreNotObjects(t *testing.T, b storage.Backend) {
	put(t, b, "dir/x", []byte("x"))
	wantMissing(t, b, "dir")

	// Deleting a name that is only a folder is deleting a missing object.
	if err := b.Delete(t.Context(), "dir"); err != nil {
		t.Fatalf("Delete(folder name): %v", err)
	}
	wantContent(t, b, "dir/x", []byte("x"))
}

func testInvalidPaths(t *testing.T, b storage.Backend) {
	for _, p := range []string{"", "../x", "a/../../x", "/abs", "a//b", "./a", `a\b`, "a\x00b"} {
		if _, err := b.Put(t.Context(), p, strings.NewReader("x"), 1, storage.PutOptions{}); err == nil {
			t.Errorf("Put(%q) succeeded, want an invalid path error", p)
		}
		if _, err := b.Stat(t.Context(), p); err == nil || errors.Is(err, storage.ErrNotExist) {
			t.Errorf("Stat(%q) error = %v, want an invalid path error", p, err)
		}
		if _, err := b.WriteIfVersion(t.Context(), p, []byte("x"), ""); err == nil {
			t.Errorf("WriteIfVersion(%q) succeeded, want an invalid path error", p)
		}
		if err := b.Delete(t.Context(), p); err == nil {
			t.Errorf("Delete(%q) succeeded, want an invalid path error", p)
		}
		if rc, err := b.Open(t.Context(), p); err == nil || errors.Is(err, storage.ErrNotExist) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Open(%q) error = %v, want an invalid path error", p, err)
		}
		if _, _, err := b.ReadVersion(t.Context(), p); err == nil {
			t.Errorf("ReadVersion(%q) succeeded, want an invalid path error", p)
		}
		if err := b.DeleteIfVersion(t.Context(), p, ""); err == nil {
			t.Errorf("DeleteIfVersion(%q) succeeded, want an invalid path error", p)
		}
		if _, err := b.WriteIfVersion(t.Context(), p, []byte("x"), "", storage.DeferSync); err == nil {
			t.Errorf("WriteIfVersion(%q, DeferSync) succeeded, want an invalid path error", p)
		}
		if err := b.DeleteIfVersion(t.Context(), p, "", storage.DeferSync); err == nil {
			t.Errorf("DeleteIfVersion(%q, DeferSync) succeeded, want an invalid path error", p)
		}
		if _, err := b.WriteIfVersion(t.Context(), p, []byte("x"), "", storage.InPlace); err == nil {
			t.Errorf("WriteIfVersion(%q, InPlace) succeeded, want an invalid path error", p)
		}
		if err := overwrite(t.Context(), b, p, []byte("x")); err == nil {
			t.Errorf("Put(%q, InPlace) succeeded, want an invalid path error", p)
		}
		st := b.Stage(t.Context())
		if _, err := st.Put(t.Context(), p, textSource("x"), 1, storage.PutOptions{IfAbsent: true}); err == nil {
			t.Errorf("Stage.Put(%q) succeeded, want an invalid path error", p)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Stage.Close: %v", err)
		}
	}
	wantPaths(t, b, "")
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("refused writes left %+v", ls)
	}
}

// testAtomicReplace overwrites one object repeatedly while readers read it:
// every read must see one whole version.
func testAtomicReplace(t *testing.T, b storage.Backend) {
	const size = 512 << 10
	old := bytes.Repeat([]byte{'o'}, size)
	newer := bytes.Repeat([]byte{'n'}, size+1000)
	put(t, b, "obj", old)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				rc, err := b.Open(ctx, "obj")
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("open during replace: %w", err)
					}
					return
				}
				data, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("read during replace: %w", err)
					}
					return
				}
				if !bytes.Equal(data, old) && !bytes.Equal(data, newer) {
					errs <- fmt.Errorf("read a mixed or partial object (%d bytes)", len(data))
					return
				}
			}
		})
	}
	for i := range 10 {
		data := old
		if i%2 == 0 {
			data = newer
		}
		if _, err := b.Put(t.Context(), "obj", bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
			t.Errorf("Put #%d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantContent(t, b, "obj", old)
	wantPaths(t, b, "", "obj")
}

var errBoom = errors.New("storagetest: reader failed on purpose")

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errBoom
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = 'f'
	}
	r.n -= len(p)
	return len(p), nil
}

func testFailingReader(t *testing.T, b storage.Backend) {
	put(t, b, "keep", []byte("old"))
	const size = 256 << 10
	_, err := b.Put(t.Context(), "keep", &failingReader{n: size / 2}, size, storage.PutOptions{})
	if err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	wantContent(t, b, "keep", []byte("old"))
	_, err = b.Put(t.Context(), "fresh/new", &failingReader{n: size / 2}, -1, storage.PutOptions{})
	if err == nil {
		t.Fatal("Put (size -1) with a failing reader succeeded")
	}
	wantMissing(t, b, "fresh/new")
	wantPaths(t, b, "", "keep")
}

func testCancelledBeforePut(t *testing.T, b storage.Backend) {
	put(t, b, "keep", []byte("old"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Put(ctx, "keep", strings.NewReader("new"), 3, storage.PutOptions{}); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	if _, err := b.Put(ctx, "other", strings.NewReader("new"), 3, storage.PutOptions{}); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	wantContent(t, b, "keep", []byte("old"))
	wantMissing(t, b, "other")
	wantPaths(t, b, "", "keep")
}

// cancellingReader cancels its context after the first chunk, then keeps
// yielding bytes slowly, as a source would that does not watch the context.
type cancellingReader struct {
	n      int
	cancel context.CancelFunc
	reads  int
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	r.reads++
	if r.reads == 2 {
		r.cancel()
	}
	if r.reads > 2 {
		time.Sleep(2 * time.Millisecond)
	}
	p = p[:min(len(p), r.n, 32<<10)]
	for i := range p {
		p[i] = 'c'
	}
	r.n -= len(p)
	return len(p), nil
}

func testCancelledDuringPut(t *testing.T, b storage.Backend) {
	put(t, b, "keep", []byte("old"))
	const size = 1 << 20
	for _, path := range []string{"keep", "fresh"} {
		ctx, cancel := context.WithCancel(t.Context())
		r := &cancellingReader{n: size, cancel: cancel}
		_, err := b.Put(ctx, path, r, size, storage.PutOptions{})
		cancel()
		if err == nil {
			t.Fatalf("Put(%q) cancelled midway succeeded", path)
		}
	}
	wantContent(t, b, "keep", []byte("old"))
	wantMissing(t, b, "fresh")
	wantPaths(t, b, "", "keep")
}

// testMetadata: a backend either keeps PutOptions.SHA256 or reports none.
func testMetadata(t *testing.T, b storage.Backend) {
	data := []byte("with metadata")
	h := sha256.Sum256(data)
	sum := catalog.Digest(h[:])
	_, err := b.Put(t.Context(), "m.txt", bytes.NewReader(data), int64(len(data)),
		storage.PutOptions{SHA256: sum, ContentType: "text/plain"})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	oi, err := b.Stat(t.Context(), "m.txt")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if oi.SHA256 != "" && oi.SHA256 != sum {
		t.Fatalf("Stat SHA256 = %q, want %q or empty", oi.SHA256, sum)
	}
	for _, oi := range list(t, b, "") {
		if oi.SHA256 != "" && oi.SHA256 != sum {
			t.Fatalf("List SHA256 = %q, want %q or empty", oi.SHA256, sum)
		}
	}

	// A verified source (the backend may skip hashing it) has its SHA256
	// stored all the same.
	_, err = b.Put(t.Context(), "v.txt", bytes.NewReader(data), int64(len(data)),
		storage.PutOptions{SHA256: sum, SourceVerified: true})
	if err != nil {
		t.Fatalf("Put (SourceVerified): %v", err)
	}
	want := ""
	if oi.SHA256 != "" { // the backend keeps metadata
		want = sum
	}
	if got, err := b.Stat(t.Context(), "v.txt"); err != nil || got.SHA256 != want {
		t.Fatalf("Stat (SourceVerified) = %+v, %v; want SHA256 %q, as for a source not verified", got, err, want)
	}
	wantContent(t, b, "v.txt", data)
}

func testDelete(t *testing.T, b storage.Backend) {
	for _, p := range []string{"a/1", "a/2", "a/b/3", "c"} {
		put(t, b, p, []byte(p))
	}
	if err := b.Delete(t.Context()); err != nil {
		t.Fatalf("Delete(): %v", err)
	}
	if err := b.Delete(t.Context(), "missing", "a/missing", "deep/missing/x"); err != nil {
		t.Fatalf("Delete(missing keys): %v", err)
	}
	if err := b.Delete(t.Context(), "a/1", "missing", "a/b/3"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantMissing(t, b, "a/1")
	wantMissing(t, b, "a/b/3")
	wantPaths(t, b, "", "a/2", "c")

	// Deleting twice is fine.
	if err := b.Delete(t.Context(), "a/1", "a/2", "c"); err != nil {
		t.Fatalf("Delete again: %v", err)
	}
	wantPaths(t, b, "")

	// The emptied folders do not block new objects at those names.
	put(t, b, "a", []byte("now a file"))
	wantContent(t, b, "a", []byte("now a file"))
}

func testListOrder(t *testing.T, b storage.Backend) {
	// Byte order of whole paths, not per-folder name order: "a-b" < "a.txt"
	// < "a/x" < "a0" ('-' < '.' < '/' < '0').
	paths := []string{"a/x", "a0", "a.txt", "a-b", "a/y/z", "b", "A", "a/y.txt", "é"}
	for _, p := range paths {
		put(t, b, p, []byte(p))
	}
	want := slices.Clone(paths)
	sort.Strings(want)
	got := list(t, b, "")
	var gotPaths []string
	for _, oi := range got {
		gotPaths = append(gotPaths, oi.Path)
		if oi.Size != int64(len(oi.Path)) {
			t.Errorf("List size of %q = %d, want %d", oi.Path, oi.Size, len(oi.Path))
		}
	}
	if !slices.Equal(gotPaths, want) {
		t.Fatalf("List = %q, want %q", gotPaths, want)
	}
}

func testListPrefix(t *testing.T, b storage.Backend) {
	for _, p := range []string{"a/1", "a/b/2", "a/b/c/3", "ab/x", "abc", "b/a/1"} {
		put(t, b, p, []byte(p))
	}
	wantPaths(t, b, "a/", "a/1", "a/b/2", "a/b/c/3")
	wantPaths(t, b, "a/b/", "a/b/2", "a/b/c/3")
	wantPaths(t, b, "a/b/c/", "a/b/c/3")
	wantPaths(t, b, "ab/", "ab/x")
	wantPaths(t, b, "b/", "b/a/1")
	wantPaths(t, b, "missing/")
	wantPaths(t, b, "a/1/") // a file is not a folder

	// A prefix that does not end in '/' is a plain string prefix, as on S3.
	wantPaths(t, b, "ab", "ab/x", "abc")
	wantPaths(t, b, "a/b/c/3", "a/b/c/3")
}

func testListStopsOnError(t *testing.T, b storage.Backend) {
	for _, p := range []string{"1", "2", "3"} {
		put(t, b, p, []byte(p))
	}
	stop := errors.New("stop here")
	var seen []string
	err := b.List(t.Context(), "", func(oi storage.ObjectInfo) error {
		if catalog.IsReserved(oi.Path) {
			return nil
		}
		seen = append(seen, oi.Path)
		if oi.Path == "2" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("List error = %v, want the callback's error", err)
	}
	if !slices.Equal(seen, []string{"1", "2"}) {
		t.Fatalf("List visited %q after the callback failed, want [1 2]", seen)
	}
}

// testManyKeys crosses S3's 1000-key page and batch-delete limits.
func testManyKeys(t *testing.T, b storage.Backend) {
	const n = 1100
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("many/%03d/k%04d", i/100, i)
	}
	jobs := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 8 {
		wg.Go(func() {
			for k := range jobs {
				if _, err := b.Put(t.Context(), k, strings.NewReader(k), int64(len(k)), storage.PutOptions{}); err != nil {
					errs <- fmt.Errorf("Put(%q): %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	put(t, b, "other", []byte("x"))
	wantPaths(t, b, "many/", keys...)
	if got := len(listPaths(t, b, "")); got != n+1 {
		t.Fatalf("List(\"\") found %d objects, want %d", got, n+1)
	}
	if err := b.Delete(t.Context(), keys...); err != nil {
		t.Fatalf("Delete(%d keys): %v", n, err)
	}
	wantPaths(t, b, "", "other")
}

func testCreateIfAbsent(t *testing.T, b storage.Backend) {
	v1, err := b.WriteIfVersion(t.Context(), "cat.json", []byte("one"), "")
	if err != nil {
		t.Fatalf("create-if-absent: %v", err)
	}
	if v1 == "" {
		t.Fatal("WriteIfVersion returned an empty version")
	}
	_, err = b.WriteIfVersion(t.Context(), "cat.json", []byte("two"), "")
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second create-if-absent error = %v, want ErrConflict", err)
	}
	data, v, err := b.ReadVersion(t.Context(), "cat.json")
	if err != nil || string(data) != "one" || v != v1 {
		t.Fatalf("ReadVersion = %q, %q, %v; want \"one\", %q", data, v, err, v1)
	}

	// A Put object can be read with ReadVersion as well.
	put(t, b, "sub/put.json", []byte("put"))
	data, v, err = b.ReadVersion(t.Context(), "sub/put.json")
	if err != nil || string(data) != "put" || v == "" {
		t.Fatalf("ReadVersion(Put object) = %q, %q, %v", data, v, err)
	}
	if _, err := b.WriteIfVersion(t.Context(), "sub/put.json", []byte("x"), ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create-if-absent over a Put object error = %v, want ErrConflict", err)
	}

	// Creating in a new folder works.
	if _, err := b.WriteIfVersion(t.Context(), "new/dir/cat.json", []byte("n"), ""); err != nil {
		t.Fatalf("create-if-absent in a new folder: %v", err)
	}
	wantPaths(t, b, "", "cat.json", "new/dir/cat.json", "sub/put.json")
}

func testWriteIfVersion(t *testing.T, b storage.Backend) {
	v1, err := b.WriteIfVersion(t.Context(), "cat.json", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := b.WriteIfVersion(t.Context(), "cat.json", []byte("two"), v1)
	if err != nil {
		t.Fatalf("WriteIfVersion(current version): %v", err)
	}
	if v2 == "" || v2 == v1 {
		t.Fatalf("new version = %q after %q, want a different non-empty version", v2, v1)
	}
	if _, err := b.WriteIfVersion(t.Context(), "cat.json", []byte("three"), v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion(stale version) error = %v, want ErrConflict", err)
	}
	data, v, err := b.ReadVersion(t.Context(), "cat.json")
	if err != nil || string(data) != "two" || v != v2 {
		t.Fatalf("ReadVersion = %q, %q, %v; want \"two\", %q", data, v, err, v2)
	}

	// A version for an object that is not there is stale too.
	if _, err := b.WriteIfVersion(t.Context(), "absent.json", []byte("x"), v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion(missing object, some version) error = %v, want ErrConflict", err)
	}
	wantMissing(t, b, "absent.json")

	// A Put behind the reader's back makes its version stale.
	put(t, b, "cat.json", []byte("changed by someone else"))
	if _, err := b.WriteIfVersion(t.Context(), "cat.json", []byte("mine"), v2); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion after a foreign Put error = %v, want ErrConflict", err)
	}
	wantContent(t, b, "cat.json", []byte("changed by someone else"))
	wantPaths(t, b, "", "cat.json")
}

func testConcurrentWriteIfVersion(t *testing.T, b storage.Backend) {
	for round := range 3 {
		path := fmt.Sprintf("race%d.json", round)
		base, err := b.WriteIfVersion(t.Context(), path, []byte("base"), "")
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var wg sync.WaitGroup
		results := make([]error, n)
		versions := make([]storage.Version, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				versions[i], results[i] = b.WriteIfVersion(t.Context(), path, []byte(fmt.Sprint("writer ", i)), base)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, storage.ErrConflict):
				t.Fatalf("round %d: writer %d error = %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		data, v, err := b.ReadVersion(t.Context(), path)
		if err != nil || string(data) != fmt.Sprint("writer ", winner) || v != versions[winner] {
			t.Fatalf("round %d: ReadVersion = %q, %q, %v; want the winner's (%d) bytes and version", round, data, v, err, winner)
		}
	}
}

// largeDoc is a document of over 1 MiB (backends may version large objects
// without their content) whose first 16 bytes say n; every one has the same
// size.
func largeDoc(n int) []byte {
	doc := bytes.Repeat([]byte("."), 1<<20+64)
	copy(doc, fmt.Sprintf("%016d", n))
	return doc
}

// Large objects of one size, written in quick succession (within one
// timestamp tick, a freed inode number reused): every version differs, and
// every stale one loses.
func testLargeVersionsInQuickSuccession(t *testing.T, b storage.Backend) {
	var seen []storage.Version
	cur := storage.Version("")
	for i := range 6 {
		v, err := b.WriteIfVersion(t.Context(), "big.json", largeDoc(i), cur)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if slices.Contains(seen, v) {
			t.Fatalf("write %d got version %q, which an earlier write had", i, v)
		}
		seen, cur = append(seen, v), v
	}
	for i, old := range seen[:len(seen)-1] {
		if _, err := b.WriteIfVersion(t.Context(), "big.json", largeDoc(100+i), old); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("WriteIfVersion(version of write %d) error = %v, want ErrConflict", i, err)
		}
		if err := b.DeleteIfVersion(t.Context(), "big.json", old); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("DeleteIfVersion(version of write %d) error = %v, want ErrConflict", i, err)
		}
	}
	data, v, err := b.ReadVersion(t.Context(), "big.json")
	if err != nil || !bytes.Equal(data, largeDoc(5)) || v != cur {
		t.Fatalf("ReadVersion = %d bytes, %q, %v; want the last write's bytes and version %q", len(data), v, err, cur)
	}

	// A plain Put of other bytes of the same size behind the writer's back
	// makes its version stale too (same bytes may keep the version: S3's
	// ETag is a digest).
	put(t, b, "big.json", largeDoc(7))
	if _, err := b.WriteIfVersion(t.Context(), "big.json", largeDoc(6), cur); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion after a foreign Put error = %v, want ErrConflict", err)
	}
}

// Writers that read a large counter, add one and write it back with the
// version they read (retrying on conflict) lose no update: the final count
// is the number of writes that won.
func testLargeReadModifyWriteRace(t *testing.T, b storage.Backend) {
	if _, err := b.WriteIfVersion(t.Context(), "count.json", largeDoc(0), ""); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for done := 0; done < each; {
				data, v, err := b.ReadVersion(t.Context(), "count.json")
				if err != nil {
					errs[w] = err
					return
				}
				var n int
				if _, err := fmt.Sscanf(string(data[:16]), "%d", &n); err != nil {
					errs[w] = fmt.Errorf("read %q: %w", data[:16], err)
					return
				}
				_, err = b.WriteIfVersion(t.Context(), "count.json", largeDoc(n+1), v)
				switch {
				case err == nil:
					done++
				case !errors.Is(err, storage.ErrConflict):
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	data, _, err := b.ReadVersion(t.Context(), "count.json")
	if err != nil || !bytes.Equal(data, largeDoc(writers*each)) {
		t.Fatalf("final count = %q, %v; want %d (an update was lost)", data[:min(16, len(data))], err, writers*each)
	}
}

// DeleteIfVersion deletes at the current version only.
func testDeleteIfVersion(t *testing.T, b storage.Backend) {
	testDeleteIfVersionOf(t, b, synced)
}

// testLarge streams 64 MiB from a generator in and out; neither side holds
// the object in memory.
func testLarge(t *testing.T, b storage.Backend) {
	if testing.Short() {
		t.Skip("64 MiB object: skipped with -short")
	}
	const size = 64 << 20
	in := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{1}), size), in)
	if _, err := b.Put(t.Context(), "big/blob.bin", src, size, storage.PutOptions{}); err != nil {
		t.Fatalf("Put 64 MiB: %v", err)
	}
	oi, err := b.Stat(t.Context(), "big/blob.bin")
	if err != nil || oi.Size != size {
		t.Fatalf("Stat = %+v, %v; want size %d", oi, err, size)
	}
	rc, err := b.Open(t.Context(), "big/blob.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := sha256.New()
	n, err := io.Copy(out, rc)
	if err != nil || n != size {
		t.Fatalf("read back %d bytes, %v; want %d", n, err, size)
	}
	if !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		t.Fatal("64 MiB object read back with other bytes")
	}
}

// readAll returns the object's bytes, failing the test on any error.
func readAll(t *testing.T, b storage.Backend, path string) string {
	t.Helper()
	r, err := b.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func putInfo(t *testing.T, b storage.Backend, path, data string, opts storage.PutOptions) storage.ObjectInfo {
	t.Helper()
	oi, err := b.Put(t.Context(), path, strings.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("Put %s: %v", path, err)
	}
	return oi
}

func listed(t *testing.T, b storage.Backend, path string) storage.ObjectInfo {
	t.Helper()
	var got storage.ObjectInfo
	err := b.List(t.Context(), path, func(oi storage.ObjectInfo) error {
		if oi.Path == path {
			got = oi
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Put, List and Stat agree on a version's fingerprint, and replacing the
// object (even with the same bytes) changes it unless the backend derives
// it from the bytes alone (S3 ETags of single-part uploads).
func testFingerprint(t *testing.T, b storage.Backend) {
	first := putInfo(t, b, "dir/f.txt", "one", storage.PutOptions{})
	if first.Fingerprint == "" || first.Path != "dir/f.txt" || first.Size != 3 {
		t.Fatalf("Put returned %+v, want path, size 3 and a fingerprint", first)
	}
	if got := listed(t, b, "dir/f.txt").Fingerprint; got != first.Fingerprint {
		t.Fatalf("List fingerprint %q, Put returned %q", got, first.Fingerprint)
	}
	st, err := b.Stat(t.Context(), "dir/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if st.Fingerprint != first.Fingerprint {
		t.Fatalf("Stat fingerprint %q, Put returned %q", st.Fingerprint, first.Fingerprint)
	}
	second := putInfo(t, b, "dir/f.txt", "two", storage.PutOptions{})
	if second.Fingerprint == first.Fingerprint {
		t.Fatalf("replacing the object kept fingerprint %q", first.Fingerprint)
	}
	if got := listed(t, b, "dir/f.txt").Fingerprint; got != second.Fingerprint {
		t.Fatalf("List fingerprint %q after replace, Put returned %q", got, second.Fingerprint)
	}
}

// IfAbsent never replaces: the second writer gets ErrConflict and the first
// writer's bytes stay.
func testPutIfAbsent(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	putInfo(t, b, "new/a.txt", "first", storage.PutOptions{IfAbsent: true})
	_, err := b.Put(ctx, "new/a.txt", strings.NewReader("stale"), 5, storage.PutOptions{IfAbsent: true})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second IfAbsent Put: err = %v, want ErrConflict", err)
	}
	if got := readAll(t, b, "new/a.txt"); got != "first" {
		t.Fatalf("content %q after a refused IfAbsent Put, want %q", got, "first")
	}

	// Racing creators: exactly one wins.
	var wins, conflicts int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := fmt.Sprintf("writer %d", i)
			_, err := b.Put(ctx, "race.txt", strings.NewReader(data), int64(len(data)), storage.PutOptions{IfAbsent: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, storage.ErrConflict):
				conflicts++
			default:
				t.Errorf("racing IfAbsent Put: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 7 {
		t.Fatalf("racing IfAbsent Puts: %d won, %d conflicts; want 1 and 7", wins, conflicts)
	}
	listedPaths := 0
	_ = b.List(ctx, "", func(storage.ObjectInfo) error { listedPaths++; return nil })
	if listedPaths != 2 {
		t.Fatalf("%d objects listed after refused writes, want 2 (no leftovers)", listedPaths)
	}
}

// IfMatch replaces only the version it names: a writer holding an old
// fingerprint cannot overwrite a newer object, nor recreate a deleted one.
func testPutIfMatch(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	v1 := putInfo(t, b, "f.txt", "v1", storage.PutOptions{})
	v2 := putInfo(t, b, "f.txt", "v2-newer", storage.PutOptions{IfMatch: v1.Fingerprint})
	_, err := b.Put(ctx, "f.txt", strings.NewReader("stale"), 5, storage.PutOptions{IfMatch: v1.Fingerprint})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Put with an old fingerprint: err = %v, want ErrConflict", err)
	}
	if got := readAll(t, b, "f.txt"); got != "v2-newer" {
		t.Fatalf("content %q after a refused IfMatch Put, want %q", got, "v2-newer")
	}
	putInfo(t, b, "f.txt", "v3", storage.PutOptions{IfMatch: v2.Fingerprint})
	if err := b.Delete(ctx, "f.txt"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "f.txt", strings.NewReader("stale"), 5, storage.PutOptions{IfMatch: v2.Fingerprint})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("IfMatch Put on a deleted object: err = %v, want ErrConflict", err)
	}
	if _, err := b.Stat(ctx, "f.txt"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("a refused IfMatch Put recreated the object: Stat err = %v", err)
	}
}

// Interrupt leaves in b what a process killed in the middle of writing size
// bytes to path leaves behind (a real kill, or its exact traces made by
// hand), without finishing or cleaning up the write.
type Interrupt func(t *testing.T, b storage.Backend, path string, size int64)

// RunLeftovers checks Backend.Leftovers and Backend.RemoveLeftovers:
// interrupted writes are found (older than a cutoff only, in path order),
// never listed as objects, and removed without touching any object.
// newBackend must return a fresh, empty root; the subtests run in
// parallel, each on a root of its own.
func RunLeftovers(t *testing.T, newBackend func(t *testing.T) storage.Backend, interrupt Interrupt) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend, interrupt Interrupt)
	}{
		{"NoneAfterWritesAndFailures", testNoLeftovers},
		{"InterruptedWrite", testInterruptedWrite},
		{"InPathOrder", testLeftoversInPathOrder},
		{"RemoveNeverTouchesObjects", testRemoveNeverTouchesObjects},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBackend(t), interrupt)
		})
	}
}

// later is a cutoff that every leftover made by the test is older than.
func later() time.Time { return time.Now().Add(time.Hour) }

func leftovers(t *testing.T, b storage.Backend, cutoff time.Time) []storage.Leftover {
	t.Helper()
	ls, err := b.Leftovers(t.Context(), cutoff)
	if err != nil {
		t.Fatalf("Leftovers: %v", err)
	}
	return ls
}

// Writes that finish, fail or are cancelled clean up after themselves.
func testNoLeftovers(t *testing.T, b storage.Backend, _ Interrupt) {
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("fresh root: Leftovers = %+v, want none", ls)
	}
	put(t, b, "a/b/c.txt", []byte("c"))
	put(t, b, "top", []byte("t"))
	if _, err := b.Put(t.Context(), "a/new", strings.NewReader("n"), 1, storage.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("{}"), ""); err != nil {
		t.Fatal(err)
	}

	// Larger than a multipart part: a failed upload must be aborted.
	const size = 10 << 20
	if _, err := b.Put(t.Context(), "a/failed", &failingReader{n: size}, -1, storage.PutOptions{}); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if _, err := b.Put(t.Context(), "a/failed-new", &failingReader{n: 1000}, 2000, storage.PutOptions{IfAbsent: true}); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("after finished and failed writes: Leftovers = %+v, want none", ls)
	}
}

func testInterruptedWrite(t *testing.T, b storage.Backend, interrupt Interrupt) {
	put(t, b, "keep/a.txt", []byte("kept"))
	put(t, b, "dir/big.bin", []byte("old"))
	start := time.Now().Add(-time.Minute) // clocks of a server may lag a little
	const size = 6 << 20
	interrupt(t, b, "dir/big.bin", size)
	wantPaths(t, b, "", "dir/big.bin", "keep/a.txt")
	wantContent(t, b, "dir/big.bin", []byte("old"))

	ls := leftovers(t, b, later())
	if len(ls) != 1 {
		t.Fatalf("after an interrupted write: Leftovers = %+v, want exactly one", ls)
	}
	l := ls[0]
	if path.Dir(l.Path) != "dir" || l.Size <= 0 || l.Size > size || l.ModTime.Before(start) || l.ModTime.After(later()) {
		t.Errorf("Leftover = %+v; want one in dir/ holding 1..%d bytes, written just now", l, size)
	}

	// A cutoff before the write: it may still be in flight, so it is not listed.
	if young := leftovers(t, b, start); len(young) != 0 {
		t.Errorf("Leftovers(cutoff before the write) = %+v, want none", young)
	}
	if err := b.RemoveLeftovers(t.Context(), ls); err != nil {
		t.Fatalf("RemoveLeftovers: %v", err)
	}
	if again := leftovers(t, b, later()); len(again) != 0 {
		t.Fatalf("after RemoveLeftovers: Leftovers = %+v, want none", again)
	}
	if err := b.RemoveLeftovers(t.Context(), ls); err != nil {
		t.Errorf("RemoveLeftovers of leftovers already gone: %v, want nil", err)
	}
	wantPaths(t, b, "", "dir/big.bin", "keep/a.txt")
	wantContent(t, b, "dir/big.bin", []byte("old"))
	wantContent(t, b, "keep/a.txt", []byte("kept"))
}

// Leftovers come in path order, whatever order they were left in.
func testLeftoversInPathOrder(t *testing.T, b storage.Backend, interrupt Interrupt) {
	put(t, b, "b/early.bin", []byte("old b"))
	put(t, b, "z/late.bin", []byte("old z"))
	const size = 6 << 20
	interrupt(t, b, "z/late.bin", size)
	interrupt(t, b, "b/early.bin", size)
	ls := leftovers(t, b, later())
	var dirs []string
	for _, l := range ls {
		dirs = append(dirs, path.Dir(l.Path))
	}
	if !slices.Equal(dirs, []string{"b", "z"}) || !slices.IsSortedFunc(ls, func(x, y storage.Leftover) int { return strings.Compare(x.Path, y.Path) }) {
		t.Fatalf("Leftovers = %+v; want one in b/, then one in z/, in path order", ls)
	}
	if err := b.RemoveLeftovers(t.Context(), ls); err != nil {
		t.Fatalf("RemoveLeftovers: %v", err)
	}
	if again := leftovers(t, b, later()); len(again) != 0 {
		t.Fatalf("after RemoveLeftovers: Leftovers = %+v, want none", again)
	}
	wantContent(t, b, "b/early.bin", []byte("old b"))
	wantContent(t, b, "z/late.bin", []byte("old z"))
}

func testRemoveNeverTouchesObjects(t *testing.T, b storage.Backend, _ Interrupt) {
	put(t, b, "keep/a.txt", []byte("kept"))
	put(t, b, catalog.TempPrefix+"x/a.txt", []byte("in a folder with a temp-like name"))
	for _, l := range []storage.Leftover{{Path: "keep/a.txt"}, {Path: catalog.TempPrefix + "x/a.txt"}, {Path: "keep/a.txt", ID: "not-an-upload"}} {
		_ = b.RemoveLeftovers(t.Context(), []storage.Leftover{l}) // may refuse or do nothing
	}
	wantContent(t, b, "keep/a.txt", []byte("kept"))
	wantContent(t, b, catalog.TempPrefix+"x/a.txt", []byte("in a folder with a temp-like name"))
}

// RunStager checks Backend.Stage and storage.Stage: staged objects are
// invisible until committed, their conditions are checked at Commit, which
// returns what Stat and List then report, and Close discards the rest.
// newBackend must return a fresh, empty root; the subtests run in
// parallel, each on a root of its own.
func RunStager(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend)
	}{
		{"InvisibleUntilCommit", testStagedInvisibleUntilCommit},
		{"CloseDiscards", testStageCloseDiscards},
		{"ConditionsAtCommit", testStageConditionsAtCommit},
		{"FailingReader", testStageFailingReader},
		{"Concurrent", testStageConcurrent},
		{"Reopens", testStageReopens},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBackend(t))
		})
	}
}

func stagePut(t *testing.T, st storage.Stage, path, data string, opts storage.PutOptions) storage.ObjectInfo {
	t.Helper()
	oi, err := st.Put(t.Context(), path, textSource(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("stage Put %s: %v", path, err)
	}
	return oi
}

func testStagedInvisibleUntilCommit(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	old := putInfo(t, b, "old.txt", "old", storage.PutOptions{})
	st := b.Stage(t.Context())
	defer st.Close()
	infos := map[string]storage.ObjectInfo{
		"a/b/new.txt": stagePut(t, st, "a/b/new.txt", "new", storage.PutOptions{IfAbsent: true, DeferSync: true}),
		"top.txt":     stagePut(t, st, "top.txt", "top", storage.PutOptions{IfAbsent: true}),
		"old.txt":     stagePut(t, st, "old.txt", "replaced", storage.PutOptions{IfMatch: old.Fingerprint, DeferSync: true}),
	}
	wantPaths(t, b, "", "old.txt")
	wantContent(t, b, "old.txt", []byte("old"))
	wantMissing(t, b, "top.txt")
	for _, p := range []string{"a/b/new.txt", "old.txt", "top.txt"} {
		oi, err := st.Commit(ctx, p)
		if err != nil {
			t.Fatalf("Commit %s: %v", p, err)
		}
		if oi.Fingerprint == "" || oi.Size != infos[p].Size || oi.Path != p {
			t.Fatalf("Commit %s returned %+v; want its path, size and fingerprint", p, oi)
		}
		infos[p] = oi
		if got := listed(t, b, p); got.Path != p || got.Fingerprint != oi.Fingerprint || got.Size != oi.Size {
			t.Fatalf("%s listed as %+v after Commit; the stage returned %+v", p, got, oi)
		}
		if got, err := b.Stat(ctx, p); err != nil || got.Path != p || got.Fingerprint != oi.Fingerprint || got.Size != oi.Size {
			t.Fatalf("Stat(%s) = %+v, %v after Commit; the stage returned %+v", p, got, err, oi)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Closing again (a deferred Close after an explicit one) changes nothing.
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Close finished what the commits began: nothing is left over (the
	// replaced version of old.txt included).
	if ls := leftovers(t, b, later()); len(ls) != 0 {
		t.Fatalf("Leftovers after Close = %+v, want none", ls)
	}
	wantPaths(t, b, "", "a/b/new.txt", "old.txt", "top.txt")
	wantContent(t, b, "a/b/new.txt", []byte("new"))
	wantContent(t, b, "old.txt", []byte("replaced"))
	wantContent(t, b, "top.txt", []byte("top"))
	if _, err := st.Commit(ctx, "top.txt"); err == nil {
		t.Fatal("a second Commit of one path succeeded")
	}
}

func testStageCloseDiscards(t *testing.T, b storage.Backend) {
	put(t, b, "keep/x.txt", []byte("keep"))
	st := b.Stage(t.Context())
	stagePut(t, st, "keep/y.txt", "y", storage.PutOptions{IfAbsent: true})
	stagePut(t, st, "fresh/deep/z.txt", "z", storage.PutOptions{IfAbsent: true})
	stagePut(t, st, "keep/x.txt", "replaced", storage.PutOptions{})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wantPaths(t, b, "", "keep/x.txt")
	wantContent(t, b, "keep/x.txt", []byte("keep"))
}

func testStageConditionsAtCommit(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	v1 := putInfo(t, b, "m.txt", "v1", storage.PutOptions{})
	st := b.Stage(t.Context())
	defer st.Close()
	stagePut(t, st, "n.txt", "stale", storage.PutOptions{IfAbsent: true})
	stagePut(t, st, "m.txt", "stale", storage.PutOptions{IfMatch: v1.Fingerprint})

	// Another writer gets there between the stage's Put and its Commit.
	put(t, b, "n.txt", []byte("other"))
	putInfo(t, b, "m.txt", "v2-other", storage.PutOptions{IfMatch: v1.Fingerprint})
	if _, err := st.Commit(ctx, "n.txt"); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Commit of a new path taken meanwhile: err = %v, want ErrConflict", err)
	}
	if _, err := st.Commit(ctx, "m.txt"); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Commit of a replacement of a version replaced meanwhile: err = %v, want ErrConflict", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, b, "n.txt", []byte("other"))
	wantContent(t, b, "m.txt", []byte("v2-other"))
	wantPaths(t, b, "", "m.txt", "n.txt")
}

func testStageFailingReader(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	st := b.Stage(t.Context())
	defer st.Close()
	const size = 256 << 10
	if _, err := st.Put(ctx, "d/f.bin", func(context.Context) (io.ReadCloser, error) { return io.NopCloser(&failingReader{n: size / 2}), nil }, size, storage.PutOptions{IfAbsent: true}); !errors.Is(err, errBoom) {
		t.Fatalf("stage Put with a failing reader: err = %v, want the reader's error", err)
	}
	if _, err := st.Put(ctx, "short.bin", textSource("abc"), 4, storage.PutOptions{IfAbsent: true}); err == nil {
		t.Fatal("stage Put of 3 bytes for a size of 4 succeeded")
	}
	if _, err := st.Commit(ctx, "d/f.bin"); err == nil {
		t.Fatal("Commit of a failed Put succeeded")
	}
	wantPaths(t, b, "")
}

func testStageConcurrent(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	st := b.Stage(t.Context())
	defer st.Close()
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p := fmt.Sprintf("d%d/f%03d.txt", i%4, i)
			if _, err := st.Put(ctx, p, textSource(p), int64(len(p)), storage.PutOptions{IfAbsent: true, DeferSync: true}); err != nil {
				t.Errorf("stage Put %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	wantPaths(t, b, "")
	var want []string
	for i := range n {
		p := fmt.Sprintf("d%d/f%03d.txt", i%4, i)
		want = append(want, p)
		wg.Go(func() {
			if _, err := st.Commit(ctx, p); err != nil {
				t.Errorf("Commit %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	sort.Strings(want)
	wantPaths(t, b, "", want...)
	for _, p := range want {
		wantContent(t, b, p, []byte(p))
	}
}

// eofReader records whether its reader was read to its end.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// A Put the stage does not keep in memory or as parts (S3: objects of
// unknown size, or ones it sends whole) read the bytes to their end, and
// its Commit reads the source again: every case ends committed, each
// source read to its end at Put, and none visible before its Commit.
func testStageReopens(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	cases := []struct {
		path  string
		size  int
		known bool // the size is given
		sum   bool // so is the SHA256
	}{
		{"small-unknown.bin", 1000, false, false},
		{"d/large-unknown.bin", 3 << 20, false, false},
		{"d/large-known.bin", 3 << 20, true, false},
		{"d/large-sum.bin", 6 << 20, true, true},
	}
	content := func(i int) []byte {
		data := make([]byte, cases[i].size)
		for j := range data {
			data[j] = byte('a' + (i+j)%26)
		}
		return data
	}
	st := b.Stage(ctx)
	defer st.Close()
	opened := make([]int, len(cases))
	for i, c := range cases {
		data := content(i)
		size := int64(-1)
		if c.known {
			size = int64(len(data))
		}
		opts := storage.PutOptions{IfAbsent: true}
		if c.sum {
			h := sha256.Sum256(data)
			opts.SHA256 = catalog.Digest(h[:])
		}
		var first *eofReader
		src := func(context.Context) (io.ReadCloser, error) {
			opened[i]++
			r := &eofReader{r: bytes.NewReader(data)}
			if first == nil {
				first = r
			}
			return io.NopCloser(r), nil
		}
		if _, err := st.Put(ctx, c.path, src, size, opts); err != nil {
			t.Fatalf("stage Put %s: %v", c.path, err)
		}
		if first == nil || !first.eof {
			t.Errorf("stage Put %s returned before its bytes were read to their end", c.path)
		}
	}
	wantPaths(t, b, "")
	for _, c := range cases {
		if _, err := st.Commit(ctx, c.path); err != nil {
			t.Fatalf("Commit %s: %v", c.path, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var want []string
	reopened := 0
	for i, c := range cases {
		wantContent(t, b, c.path, content(i))
		want = append(want, c.path)
		if opened[i] > 1 {
			reopened++
		}
	}
	slices.Sort(want)
	wantPaths(t, b, "", want...)
	t.Logf("read again at Commit: %d of %d", reopened, len(cases))
}

// textSource is a Source of fixed bytes.
func textSource[T string | []byte](data T) storage.Source {
	return func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(data))), nil
	}
}

// overwrite is a write that may rewrite the object in place.
func overwrite(ctx context.Context, b storage.Backend, p string, data []byte) error {
	_, err := b.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{InPlace: true, DeferSync: true})
	return err
}
