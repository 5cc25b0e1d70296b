package process

import (
	"errors"

	"golang.org/x/sys/windows"
)

// stillActive is the exit code GetExitCodeProcess reports for a process
// that has not ended (STILL_ACTIVE).
const stillActive = 259

// Alive reports whether pid names a running process. OpenProcess refuses
// an id no process has with ERROR_INVALID_PARAMETER; any other refusal
// (another user's process) counts as running. A process that has ended
// but whose handle someone still holds opens and reports its exit code.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return !errors.Is(err, windows.ERROR_INVALID_PARAMETER)
	}
	defer func() { _ = windows.CloseHandle(h) }()
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	return code == stillActive
}
