//go:build unix

package process

import (
	"errors"
	"syscall"
)

// Alive reports whether pid names a running process: signal 0 checks
// without signalling, and EPERM means it runs as another user.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
