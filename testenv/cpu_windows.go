package testenv

import (
	"time"

	"golang.org/x/sys/windows"
)

// CPUTime is the process's user + kernel CPU time so far
// (GetProcessTimes). Benchmarks report it beside the wall time: on a
// shared machine the wall time swings with the load, the CPU time much
// less.
func CPUTime() (time.Duration, error) {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0, err
	}

	// Filetime counts 100 ns ticks.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100, nil
}
