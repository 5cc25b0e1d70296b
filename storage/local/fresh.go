package local

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// A folder's own fsync makes the names in it durable, not the folder's
// name in its parent: after a power loss, a durable file in a folder made
// just before could vanish with its folder. So folders made are noted as
// fresh; a durable commit below one flushes each fresh folder's parent
// (once), and Sync (syncfs) flushes them all.

// freshFolders returns the folders made and not yet flushed.
func (b *Backend) freshFolders() []string {
	var dirs []string
	b.fresh.Range(func(k, _ any) bool {
		dirs = append(dirs, k.(string))
		return true
	})
	return dirs
}

// forgetFresh drops folders whose entries were flushed.
func (b *Backend) forgetFresh(dirs []string) {
	for _, d := range dirs {
		b.fresh.Delete(d)
	}
}

// synced tells the test hook of an fsync of a file or a folder in dir.
func (b *Backend) synced(kind, dir string) {
	if b.onSync != nil {
		b.onSync(kind, dir)
	}
}

// syncFreshParents makes dir's path durable: the parent of every fresh
// folder on it, from dir up to the root, is fsynced. p names the object
// for messages.
func (s *stage) syncFreshParents(dir, p string) error {
	for ; dir != "."; dir = path.Dir(dir) {
		if _, ok := s.b.fresh.Load(dir); !ok {
			continue
		}
		parent := path.Dir(dir)
		d, err := s.folder(parent, p)
		if err != nil {
			return err
		}
		if err := unix.Fsync(d); err != nil {
			return fmt.Errorf("put %q in %s: sync folder %q: %w", p, s.b.root, parent, err)
		}
		s.b.synced("folder", parent)
		s.b.fresh.Delete(dir)
	}
	return nil
}
