package local

import (
	"os"
	"testing"
)

// symlink makes the link newname to oldname, or skips the test where
// Windows does not let this user make links (no developer mode, no
// privilege).
func symlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Skipf("cannot make a symlink here: %v", err)
	}
}

// killed reports whether the process ended by os.Process.Kill
// (TerminateProcess with exit code 1).
func killed(ps *os.ProcessState) bool { return ps.ExitCode() == 1 }

// newFilePerm is the permission a file written with 0o644 gets: Windows
// has only a read-only attribute.
func newFilePerm() os.FileMode { return 0o666 }
