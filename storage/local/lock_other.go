//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package local

import (
	"errors"
	"os"
)

// errNoFileLock is why compare-and-swap writes fail on systems without a
// lock that belongs to an open file (flock(2), LockFileEx): a process-wide
// lock (fcntl) would not exclude the process's own goroutines.
var errNoFileLock = errors.New("compare-and-swap writes need flock(2) or LockFileEx, which this system does not have")

func tryLockFile(*os.File) (bool, error) { return false, errNoFileLock }

func unlockFile(*os.File) {}
