package testenv

import (
	"testing"

	"golang.org/x/sys/windows"
)

// FileID is the identity of the file name (its file index), not following
// a final symlink: a file rewritten by a temp file and a rename has
// another one, a file rewritten in place the same.
func FileID(t testing.TB, name string) uint64 {
	t.Helper()
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(p, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer func() { _ = windows.CloseHandle(h) }()
	var d windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &d); err != nil {
		t.Fatalf("file id of %s: %v", name, err)
	}
	return uint64(d.FileIndexHigh)<<32 | uint64(d.FileIndexLow)
}
