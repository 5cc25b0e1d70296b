//go:build unix

package main

import (
	"os"
	"syscall"
)

// supported reports why the harness cannot run here: nil on Unix.
func supported() error { return nil }

// syncAll flushes every filesystem (sync(2)), so that no tool pays for
// what an earlier one left to write. Best effort: Linux's reports nothing.
func syncAll() { syscall.Sync() } //nolint:errcheck // macOS and the BSDs return an error

// peakRSS is the ended process's peak resident set in KiB (getrusage).
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss) * maxrssBytes / 1024
	}
	return 0
}
