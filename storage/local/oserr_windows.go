package local

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// classOf reads Windows's error codes. A file another program holds open
// without sharing it (ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION) is
// busy: it may pass.
func classOf(errno syscall.Errno) errClass {
	switch errno {
	case windows.ERROR_DISK_FULL, windows.ERROR_HANDLE_DISK_FULL:
		return classFull
	case windows.ERROR_IO_DEVICE, windows.ERROR_CRC, windows.ERROR_NOT_READY:
		return classIO
	case windows.ERROR_SHARING_VIOLATION, windows.ERROR_LOCK_VIOLATION, windows.ERROR_SEM_TIMEOUT:
		return classBusy
	case windows.ERROR_ACCESS_DENIED:
		return classDenied
	case windows.ERROR_WRITE_PROTECT:
		return classReadOnly
	}
	return classOther
}
