//go:build !windows

package probe

// folderSyncUnsupported: every error of a folder's fsync counts on Unix.
func folderSyncUnsupported(error) bool { return false }
