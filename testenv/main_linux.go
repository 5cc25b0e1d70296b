package testenv

import (
	"os"

	"golang.org/x/sys/unix"
)

// memoryMinFree is the room /dev/shm must have for the tests' folders
// (they hold small files; a container's default 64 MiB is too tight).
const memoryMinFree = 1 << 30

// memoryTempDir makes a fresh folder on /dev/shm, or returns "" where the
// tests should keep the default temporary folder.
func memoryTempDir() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Bavail*uint64(st.Bsize) < memoryMinFree {
		return ""
	}
	dir, err := os.MkdirTemp("/dev/shm", "distributor-test-")
	if err != nil {
		return ""
	}
	return dir
}
