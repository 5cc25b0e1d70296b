package local

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// A folder large enough to be stat'ed by two goroutines lists exactly what
// a small one does: every file and symlink in whole-path byte order, with
// its size and fingerprint; no temp name; folders named like a temp file
// descended into; "x/" after "x-y" and "x.z".
func TestListLargeFolder(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { listLargeFolder(t, ti.new(t)) })
}

// largeFolder is the files a large folder holds: twice the size from which
// Linux stats a folder's entries in two goroutines (parallelStats).
const largeFolder = 256

func listLargeFolder(t *testing.T, b *Backend) {
	want := map[string]int{}
	for i := range largeFolder {
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
	symlink(t, "f0001", filepath.Join(b.root, "big", "link"))
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
		fi, err := os.Lstat(filepath.Join(b.root, oi.Path))
		must(t, err)
		if fp := fingerprint(b.r, oi.Path, fi); oi.Fingerprint != fp {
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
