//go:build unix

package local

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// symlink makes the link newname to oldname.
func symlink(t *testing.T, oldname, newname string) {
	t.Helper()
	must(t, os.Symlink(oldname, newname))
}

// killed reports whether the process ended by SIGKILL (os.Process.Kill).
func killed(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signal() == syscall.SIGKILL
}

// newFilePerm is the permission a file written with 0o644 gets.
func newFilePerm() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return 0o644 &^ os.FileMode(m)
}
