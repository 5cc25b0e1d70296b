//go:build !linux

package local

// SyncGroup lets the backends that share it (the roots of one process)
// share their flushes. On Linux they share syncfs(2) barriers; here every
// write is durable when it returns, so there is no flush to share and a
// group changes nothing.
type SyncGroup struct{}

// NewSyncGroup returns an empty group.
func NewSyncGroup() *SyncGroup { return &SyncGroup{} }
