//go:build !windows

package local

import "syscall"

func classOf(errno syscall.Errno) errClass {
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT:
		return classFull
	case syscall.EIO:
		return classIO
	case syscall.EAGAIN, syscall.EBUSY, syscall.ETIMEDOUT:
		return classBusy
	case syscall.EACCES, syscall.EPERM:
		return classDenied
	case syscall.EROFS:
		return classReadOnly
	}
	return classOther
}
