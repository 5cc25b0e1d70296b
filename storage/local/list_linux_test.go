package local

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
