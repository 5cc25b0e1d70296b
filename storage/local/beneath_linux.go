package local

import (
	"errors"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// Reads in one call: openat2(2) resolves the whole path in the kernel,
// refusing any symlink on the way (RESOLVE_NO_SYMLINKS) and any escape from
// the root (RESOLVE_BENEATH), where the general path stats every component
// first (about ten system calls per file). Whatever it does not answer
// plainly (a link, something not a regular file, a kernel without openat2)
// goes the general way, which explains it.

// openBeneath opens p below the root. ok is false when the general path
// must decide; err is set only with ok (a missing p).
func (b *Backend) openBeneath(p string, flags uint64) (fd int, ok bool, err error) {
	if b.noOpenat2.Load() || catalog.ValidatePath(p) != nil {
		return -1, false, nil
	}
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(b.rootFD, p, &how)
		switch {
		case err == nil:
			return fd, true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS):
			b.noOpenat2.Store(true) // an old kernel, or a sandbox without it
			return -1, false, nil
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			// No link was followed (that is ELOOP), so p is simply not
			// there, or a file is where a folder of it would be.
			return -1, true, b.notExist(p)
		default:
			return -1, false, nil
		}
	}
}

// statBeneath is Stat in three system calls (one for a name in the root
// itself: fstatat, which follows no link there); ok as for openBeneath.
func (b *Backend) statBeneath(p string) (_ storage.ObjectInfo, ok bool, _ error) {
	if !strings.Contains(p, "/") && catalog.ValidatePath(p) == nil {
		var st unix.Stat_t
		err := unix.Fstatat(b.rootFD, p, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			return storage.ObjectInfo{}, true, b.notExist(p)
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
			return statInfo(p, &st), true, nil
		}
		return storage.ObjectInfo{}, false, nil // a link, a folder...: the general path says which
	}
	fd, ok, err := b.openBeneath(p, unix.O_PATH)
	if !ok || err != nil {
		return storage.ObjectInfo{}, ok, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return storage.ObjectInfo{}, false, nil
	}
	return statInfo(p, &st), true, nil
}

// readBeneath opens the regular file p for reading; ok as for openBeneath.
func (b *Backend) readBeneath(p string) (_ *fdFile, ok bool, _ error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer (it is
	// refused below). Linux ignores it for regular files, so it stays set
	// (clearing it cost a system call per file); should a read ever answer
	// EAGAIN, fdFile.Read clears it then.
	fd, ok, err := b.openBeneath(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if !ok || err != nil {
		return nil, ok, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, false, nil
	}
	f := newFdFile(fd, filepath.Join(b.root, p))
	f.left, f.size = st.Size, st.Size
	return f, true, nil
}
