//go:build unix

package testenv

import (
	"syscall"
	"time"
)

// CPUTime is the process's user + system CPU time so far (getrusage).
// Benchmarks report it beside the wall time: on a shared machine the wall
// time swings with the load, the CPU time much less.
func CPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
