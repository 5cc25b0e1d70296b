package local

import (
	"golang.org/x/sys/windows"

	"github.com/distributor/distributor/storage"
)

var classifyCases = []classifyCase{
	{windows.ERROR_DISK_FULL, storage.ErrUnavailable, hintFull},
	{windows.ERROR_HANDLE_DISK_FULL, storage.ErrUnavailable, hintFull},
	{windows.ERROR_IO_DEVICE, storage.ErrUnavailable, hintIO},
	{windows.ERROR_SHARING_VIOLATION, storage.ErrUnavailable, hintBusy},
	{windows.ERROR_LOCK_VIOLATION, storage.ErrUnavailable, hintBusy},
	{windows.ERROR_ACCESS_DENIED, storage.ErrDenied, hintDenied},
	{windows.ERROR_WRITE_PROTECT, storage.ErrDenied, hintReadOnly},
	{windows.ERROR_FILE_NOT_FOUND, nil, ""},
	{windows.ERROR_PATH_NOT_FOUND, nil, ""},
	{windows.ERROR_ALREADY_EXISTS, nil, ""},
}
