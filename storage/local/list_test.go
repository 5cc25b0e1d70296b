package local

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// A folder large enough to be stat'ed by two goroutines lists exactly what
// a small one does: every file and symlink in whole-path byte order, with
// its size and fingerprint; no temp name; folders named like a temp file
// descended into; "x/" after "x-y" and "x.z".
func TestListLargeFolder(t *testing.T) {
	b := newBackend(t)
	want := map[string]int{}
	for i := range 2 * parallelStats {
		p := fmt.Sprintf("big/f%04d", i)
		must(t, os.MkdirAll(filepath.Join(b.root, "big"), 0o755))
		must(t, os.WriteFile(filepath.Join(b.root, p), make([]byte, i%7), 0o644))
		want[p] = i % 7
	}
	for _, p := range []string{"big/x-y", "big/x.z", "big/x/in", "big/" + catalog.TempPrefix + "dir/in"} {
		must(t, os.MkdirAll(filepath.Join(b.root, filepath.Dir(p)), 0o755))
		must(t, os.WriteFile(filepath.Join(b.root, p), []byte("abc"), 0o644))
		want[p] = 3
	}
	must(t, os.WriteFile(filepath.Join(b.root, "big", catalog.TempPrefix+"crash"), []byte("x"), 0o644))
	must(t, os.Symlink("f0001", filepath.Join(b.root, "big", "link")))
	want["big/link"] = len("f0001")

	var got []storage.ObjectInfo
	must(t, b.List(t.Context(), "", func(oi storage.ObjectInfo) error { got = append(got, oi); return nil }))
	var paths []string
	for _, oi := range got {
		paths = append(paths, oi.Path)
		size, ok := want[oi.Path]
		if !ok || oi.Size != int64(size) {
			t.Fatalf("listed %q of %d bytes; want %v, %d bytes", oi.Path, oi.Size, ok, size)
		}
		var st syscall.Stat_t
		must(t, syscall.Lstat(filepath.Join(b.root, oi.Path), &st))
		if fp := fmt.Sprintf("%d:%d:%d", st.Ino, st.Size, st.Mtim.Nano()); oi.Fingerprint != fp {
			t.Fatalf("%q: fingerprint %q, want %q", oi.Path, oi.Fingerprint, fp)
		}
	}
	if len(paths) != len(want) {
		t.Fatalf("listed %d objects, want %d", len(paths), len(want))
	}
	if !slices.IsSortedFunc(paths, strings.Compare) {
		t.Fatalf("listing not in byte order: %q", paths)
	}
	if i, j := slices.Index(paths, "big/x.z"), slices.Index(paths, "big/x/in"); i < 0 || j != i+1 {
		t.Fatalf("big/x/in at %d, want right after big/x.z (%d)", j, i)
	}
}

// The listing's fingerprint (from a raw stat) and Stat's (from an
// os.FileInfo) are the same string for the same file, or a listed file
// would look changed to a reader that Stats it.
func TestStatFingerprintMatchesFileInfos(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, size := range []int{0, 1, 12345} {
		p := filepath.Join(dir, fmt.Sprintf("f%d", size))
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if got, want := statFingerprint(&st), fingerprint(nil, "", fi); got != want || want == "" {
			t.Errorf("size %d: statFingerprint = %q, fingerprint = %q", size, got, want)
		}
	}
}
