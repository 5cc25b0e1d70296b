//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid names a running process (signal 0
// checks without signalling; EPERM means it runs as another user).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
