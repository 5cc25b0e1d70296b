//go:build windows

package probe

// folderSyncUnsupported: Windows cannot fsync a folder (the local backend
// does not either); a file's metadata is durable with the file.
func folderSyncUnsupported(error) bool { return true }
