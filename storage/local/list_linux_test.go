package local

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"

	"golang.org/x/sys/unix"
)

// TestListLargeFolder lists a folder that Linux stats in two goroutines.
func TestLargeFolderIsStatedInParallel(t *testing.T) {
	if largeFolder < parallelStats {
		t.Fatalf("largeFolder (%d) is below parallelStats (%d)", largeFolder, parallelStats)
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

// A walk lists folders ahead of the one it reports from: over a tree of
// many folders, nested and empty ones among them, it still reports every
// file once, in whole-path byte order, under a prefix too; a callback
// that stops it leaves no folder open nor a listing running.
func TestWalkAheadReportsInPathOrderAndStopsClean(t *testing.T) {
	// Not parallel: it counts the process's open files and goroutines.
	b := testImpls[0].new(t)
	rng := rand.New(rand.NewPCG(7, 35))
	var want []string
	for i := range 600 {
		p := fmt.Sprintf("d%02d/s%d/f%03d", rng.IntN(17), rng.IntN(3), i)
		if rng.IntN(4) == 0 {
			p = fmt.Sprintf("d%02d/f%03d", rng.IntN(17), i)
		}
		if rng.IntN(9) == 0 {
			p = fmt.Sprintf("d%02d/s%d/t/u/f%03d", rng.IntN(17), rng.IntN(3), i)
		}
		must(t, os.MkdirAll(filepath.Join(b.root, filepath.Dir(p)), 0o755))
		must(t, os.WriteFile(filepath.Join(b.root, p), nil, 0o644))
		want = append(want, p)
	}
	for i := range 5 {
		must(t, os.MkdirAll(filepath.Join(b.root, fmt.Sprintf("d%02d/empty%d", i, i)), 0o755))
	}
	slices.Sort(want)

	for _, prefix := range []string{"", "d03/", "d1"} {
		var got []string
		must(t, b.List(t.Context(), prefix, func(oi storage.ObjectInfo) error { got = append(got, oi.Path); return nil }))
		var under []string
		for _, p := range want {
			if strings.HasPrefix(p, prefix) {
				under = append(under, p)
			}
		}
		if !slices.Equal(got, under) {
			t.Fatalf("List(%q) reported %d paths, want %d in path order:\n got %q\nwant %q", prefix, len(got), len(under), got, under)
		}
	}

	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	stop := errors.New("stop")
	for _, at := range []int{0, 1, 57, 300, len(want) - 1} {
		n := 0
		err := b.List(t.Context(), "", func(storage.ObjectInfo) error {
			if n == at {
				return stop
			}
			n++
			return nil
		})
		if !errors.Is(err, stop) || n != at {
			t.Fatalf("stopped at %d: List = %v after %d reports", at, err, n)
		}
	}
	if got := openFDs(t); got != fds {
		t.Errorf("open files: %d after the stopped walks, %d before", got, fds)
	}
	if got := runtime.NumGoroutine(); got > goroutines {
		t.Errorf("goroutines: %d after the stopped walks, %d before", got, goroutines)
	}
}

// openFDs counts the process's open files.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents)
}
