//go:build unix

package local

import (
	"io/fs"
	"os"
	"syscall"
)

// fileID is fi's inode number.
func fileID(_ *os.Root, _ string, fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Ino), true
}

// folderSync flushes the folder d's entries (fsync).
func folderSync(d *os.File) error { return d.Sync() }
