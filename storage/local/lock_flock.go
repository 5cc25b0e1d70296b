//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package local

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLockFile takes an exclusive flock(2) of f without waiting; false when
// another open file holds it. flock locks belong to the open file, so
// another open of the lock file in this process is excluded too.
func tryLockFile(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK), errors.Is(err, unix.EINTR):
		return false, nil
	}
	return false, err
}

// unlockFile does nothing: closing f releases its flock.
func unlockFile(*os.File) {}
