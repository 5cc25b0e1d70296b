package local

import (
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// fileID is the file index of name in r (fi's file), which a FileInfo of
// Windows does not carry: a rename keeps it, a new file has another. Only
// regular files are asked (a link would be followed).
func fileID(r *os.Root, name string, fi fs.FileInfo) (uint64, bool) {
	if r == nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	f, err := r.Open(name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var d windows.ByHandleFileInformation
	if windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &d) != nil {
		return 0, false
	}
	return uint64(d.FileIndexHigh)<<32 | uint64(d.FileIndexLow), true
}

// folderSync does nothing: Windows cannot flush a folder (FlushFileBuffers
// refuses a folder's handle), so a name made or removed just before a
// power loss may be lost, while NTFS's journal keeps the folder itself
// consistent. The files themselves are flushed.
func folderSync(*os.File) error { return nil }
