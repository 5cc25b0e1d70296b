//go:build unix

package testenv

import (
	"os"
	"syscall"
	"testing"
)

// FileID is the identity of the file name (its inode), not following a
// final symlink: a file rewritten by a temp file and a rename has another
// one, a file rewritten in place the same.
func FileID(t testing.TB, name string) uint64 {
	t.Helper()
	fi, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Ino)
}
