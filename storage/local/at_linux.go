package local

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// The compare-and-swap and bookkeeping paths of a publication (the lock,
// the catalog's version check, the intent, the fingerprint shards, the
// lock object) resolve each path in one openat2(2) below the root's
// handle, refusing every symlink (RESOLVE_NO_SYMLINKS) and every escape
// (RESOLVE_BENEATH), and use the descriptor directly: an os.Root walk
// opened each folder on the way and set up Go's poller for every file
// (3-4 system calls more per open, about 40 opens per publication).
// Whatever openat2 does not answer plainly (a link: ELOOP; a kernel
// without it) takes the general os.Root path, which explains a refusal.

// at resolves p below the root with openat2. ENOSYS marks the kernel as
// without it; the error is the raw errno otherwise.
func (b *Backend) at(p string, flags, mode uint64) (int, error) {
	if b.noOpenat2.Load() {
		return -1, unix.ENOSYS
	}

	// No O_NOFOLLOW: RESOLVE_NO_SYMLINKS then refuses a link as the last
	// component too (ELOOP), also for O_DIRECTORY and O_PATH, where
	// O_NOFOLLOW would answer ENOTDIR or open the link itself.
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(b.rootFD, p, &how)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ENOSYS) {
			b.noOpenat2.Store(true) // an old kernel, or a sandbox without it
		}
		return fd, err
	}
}

// plainMissing reports whether an openat2 error means the path is simply
// not there: no link was followed (that is ELOOP), so a component is
// missing or a file stands where a folder of it would be.
func plainMissing(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// dirAt opens the folder dir below the root (the root itself for ".").
// The returned close does nothing for the root's own handle.
func (b *Backend) dirAt(dir string) (int, func(), error) {
	if dir == "." {
		return b.rootFD, func() {}, nil
	}
	fd, err := b.at(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// readVersionAt is readVersion in one openat2; ok is false when the
// general path must decide.
func (b *Backend) readVersionAt(p string) (_ []byte, _ storage.Version, ok bool, _ error) {
	if catalog.ValidatePath(p) != nil {
		return nil, "", false, nil
	}
	begin := time.Now()

	// O_NONBLOCK: a FIFO must not block the open (refused below).
	fd, err := b.at(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	switch {
	case plainMissing(err):
		return nil, "", true, nil
	case err != nil:
		return nil, "", false, nil
	}
	f := newFdFile(fd, path.Join(b.root, p))
	defer f.Close()
	data, v, ok, err := b.readOpen(f, begin)
	return data, v, ok, err
}

// readOpen reads the open file f whole and returns its version as
// readVersion does (a stamp or a settled stat for a large file, else the
// content's digest); ok is false when f is not a regular file. Only a
// file large enough for a stamp is asked for one: a small one is
// versioned by its content whatever it carries.
func (b *Backend) readOpen(f *fdFile, begin time.Time) (_ []byte, _ storage.Version, ok bool, _ error) {
	fd := int(f.fd.Load())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, "", false, nil
	}
	var stamped storage.Version
	hasStamp := false
	if st.Size >= statVersionMin {
		// The stamp before the stat (stamp_linux.go).
		if stamped, hasStamp = stampedVersion(fd); hasStamp {
			if err := unix.Fstat(fd, &st); err != nil {
				return nil, "", true, fmt.Errorf("read %s: %w", f.name, err)
			}
		}
	}
	data := make([]byte, 0, st.Size+1) // +1: EOF without a second buffer
	for {
		want := cap(data) - len(data)
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", true, err
		}

		// A regular file reads short only at its end: the whole size the
		// fstat gave, read short, needs no read(2) more to find EOF.
		if n < want && int64(len(data)) == st.Size {
			break
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, 64<<10)
		}
	}
	whole := int64(len(data)) == st.Size
	if hasStamp && whole {
		return data, stamped, true, nil
	}
	if whole && st.Size >= statVersionMin && time.Unix(st.Mtim.Unix()).Before(begin.Add(-b.settle)) && time.Unix(st.Ctim.Unix()).Before(begin.Add(-b.settle)) {
		return data, statVersionOf(&st), true, nil
	}
	return data, Version(data), true, nil
}

// statVersionOf is statVersion for a stat(2) result.
func statVersionOf(st *unix.Stat_t) storage.Version {
	return storage.Version(fmt.Sprintf("stat:%d:%d:%d:%d:%d", st.Dev, st.Ino, st.Size,
		st.Mtim.Nano(), st.Ctim.Nano()))
}

// currentIsAt is currentIs through openat2; ok is false when the general
// path must decide.
func (b *Backend) currentIsAt(p string, want storage.Version) (same, ok bool, _ error) {
	switch {
	case strings.HasPrefix(string(want), "stamp:"):
		fd, err := b.at(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if plainMissing(err) {
			return false, true, nil
		}
		if err != nil {
			return false, false, nil
		}
		defer unix.Close(fd)
		v, stamped := stampedVersion(fd)
		return stamped && v == want, true, nil
	case want == "" || strings.HasPrefix(string(want), "stat:"):
		fd, err := b.at(p, unix.O_PATH, 0)
		if plainMissing(err) {
			return want == "", true, nil
		}
		if err != nil {
			return false, false, nil
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return false, false, nil // a folder, a device...: the general path says which
		}
		return statVersionOf(&st) == want, true, nil
	}
	// A content's version: the digest of the content now (neither a
	// stamp nor a stat version is one), hashed as it streams by, so that
	// a large catalog is not held to be checked.
	return b.contentIsAt(p, want)
}

// contentIsAt reports whether the content at p has the digest want
// (Version); ok is false when the general path must decide.
func (b *Backend) contentIsAt(p string, want storage.Version) (same, ok bool, _ error) {
	if catalog.ValidatePath(p) != nil {
		return false, false, nil
	}

	// O_NONBLOCK: a FIFO must not block the open (refused below).
	fd, err := b.at(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	switch {
	case plainMissing(err):
		return false, true, nil
	case err != nil:
		return false, false, nil
	}
	f := newFdFile(fd, path.Join(b.root, p))
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, false, nil
	}
	v, err := contentVersion(f, st.Size)
	return err == nil && v == want, true, err
}

// openLockAt opens .distributor/cas.lock for the compare-and-swap lock in
// one openat2 (the folder made first if missing); ok is false when the
// general path must open it.
func (b *Backend) openLockAt() (fd int, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		fd, err := b.at(lockName, unix.O_RDWR|unix.O_CREAT, 0o644)
		if err == nil {
			return fd, true, nil
		}
		if !errors.Is(err, unix.ENOENT) || attempt > 0 {
			return -1, false, nil
		}
		switch err := unix.Mkdirat(b.rootFD, catalog.ReservedDir, 0o755); {
		case err == nil:
			b.fresh.Store(catalog.ReservedDir, struct{}{})
		case !errors.Is(err, unix.EEXIST):
			return -1, true, fmt.Errorf("lock in %s: mkdir %s: %w", b.root, catalog.ReservedDir, err)
		}
	}
}

// removeAt is remove through openat2: p's folder is opened once (the root
// for a top-level p), p is unlinked relative to it, then the folders it
// emptied are removed up to (not including) stop or the root. ok is
// false when the general path must decide (a link on the way).
func (b *Backend) removeAt(p, stop string) (dir string, ok bool, _ error) {
	dir, base := path.Dir(p), path.Base(p)
	d, closeDir, err := b.dirAt(dir)
	if plainMissing(err) {
		return "", true, nil
	}
	if err != nil {
		return "", false, nil
	}
	defer closeDir()

	// unlink(2) refuses a folder (EISDIR: folders are not objects) and
	// removes a link itself, never its target: no stat first.
	switch err := unix.Unlinkat(d, base, 0); {
	case plainMissing(err), errors.Is(err, unix.EISDIR):
		return "", true, nil
	case err != nil:
		return "", true, fmt.Errorf("delete %q in %s: %w", p, b.root, err)
	}
	for dir != "." && dir != stop && b.rmdirAt(dir) {
		dir = path.Dir(dir)
	}
	return dir, true, nil
}

// rmdirAt removes the folder dir if it is empty, relative to its parent
// opened below the root; false when it stays.
func (b *Backend) rmdirAt(dir string) bool {
	parent, closeParent, err := b.dirAt(path.Dir(dir))
	if err != nil {
		return false
	}
	defer closeParent()
	return unix.Unlinkat(parent, path.Base(dir), unix.AT_REMOVEDIR) == nil
}

// syncDirAt fsyncs the folder dir opened below the root; ok is false when
// the general path must do it.
func (b *Backend) syncDirAt(dir string) (ok bool, _ error) {
	d, closeDir, err := b.dirAt(dir)
	if plainMissing(err) {
		return true, err
	}
	if err != nil {
		return false, nil
	}
	defer closeDir()
	if err := unix.Fsync(d); err != nil {
		return true, fmt.Errorf("sync folder %q: %w", dir, err)
	}
	b.synced("folder", dir)
	return true, nil
}

// listedDir opens the folder dir for a listing: one openat2 below the
// root (a handle of its own, even for the root: reading a folder moves
// its offset); through the root (os.Root) when that does not answer
// plainly.
func (b *Backend) listedDir(r *os.Root, dir string) (int, func(), error) {
	fd, err := b.at(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		return fd, func() { unix.Close(fd) }, nil
	}
	if plainMissing(err) {
		return -1, nil, err
	}
	b.tookGeneral("list " + dir)
	d, err := r.Open(dir)
	if err != nil {
		return -1, nil, err
	}
	return int(d.Fd()), func() { d.Close() }, nil
}

// readNames returns the names in the folder fd, just opened (without "."
// and ".."), read with getdents(2) into a pooled buffer: no os.File, and
// so no poller set-up, for it.
func (b *Backend) readNames(fd int, dir string) ([]string, error) {
	buf := b.dirents.Get().(*[]byte)
	defer b.dirents.Put(buf)
	var names []string
	for {
		n, err := unix.ReadDirent(fd, *buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent((*buf)[:n], -1, names)
	}
}

// checkPathAt is checkPath with one fstatat(2) per component relative to
// the root's handle (an os.Root Lstat opens the component's folder
// first). It only refuses early, before the compare-and-swap lock is
// taken (a refused write then leaves nothing behind); the openat2 under
// the lock decides.
func (b *Backend) checkPathAt(p string) error {
	for i := 0; ; {
		j := strings.IndexByte(p[i:], '/')
		name := p
		if j >= 0 {
			name = p[:i+j]
		}
		var st unix.Stat_t
		err := unix.Fstatat(b.rootFD, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case plainMissing(err):
			return nil // nothing below can exist either
		case err != nil, st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return b.checkPath(b.r, p) // it explains
		case j < 0:
			return nil
		}
		i += j + 1
	}
}
