package local

// A folder's own fsync makes the names in it durable, not the folder's
// name in its parent: after a power loss, a durable file in a folder made
// just before could vanish with its folder. So folders made are noted as
// fresh; a durable commit below one flushes each fresh folder's parent
// (once), and Sync flushes them all (Linux: syncfs).

// freshFolders returns the folders made and not yet flushed.
func (b *Backend) freshFolders() []string {
	var dirs []string
	b.fresh.Range(func(k, _ any) bool {
		dirs = append(dirs, k.(string))
		return true
	})
	return dirs
}

// synced tells the test hook of an fsync of a file or a folder in dir.
func (b *Backend) synced(kind, dir string) {
	if b.onSync != nil {
		b.onSync(kind, dir)
	}
}

// hasFresh reports whether a folder was made since the last Sync.
func (b *Backend) hasFresh() (found bool) {
	b.fresh.Range(func(_, _ any) bool { found = true; return false })
	return found
}
