package local

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// forgetFresh drops folders whose entries were flushed.
func (b *Backend) forgetFresh(dirs []string) {
	for _, d := range dirs {
		b.fresh.Delete(d)
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
