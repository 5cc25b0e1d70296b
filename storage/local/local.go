// Package local is the storage.Backend on a local folder.
//
// Confinement: every path is checked with catalog.ValidatePath and every
// operation resolves it below the folder's handle, with openat2(2)
// (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, at.go) or, where that does not
// answer plainly, through an os.Root opened on the folder, so nothing
// outside it can be reached. On top of that, any path with a symlink in it
// (folder or final name) is refused with ErrOutsideRoot: the simplest rule
// that cannot be talked into writing through a link, even one that points
// inside the root today and elsewhere tomorrow. List skips symlinks and
// other non-regular files.
//
// Writes go to a temp file beside the target (named catalog.TempPrefix+random,
// never listed), are fsynced, renamed over the target and the target's folder is fsynced, so an
// object is durable when Put returns. Writes of new paths (PutOptions.IfAbsent)
// use an unnamed file instead (O_TMPFILE, named by linkat(2) when complete):
// a killed process leaves no temp name behind for them. A killed replacing
// write does; Leftovers finds those. Every write is a stage (stage.go): a
// Put is a stage of one object, a publication stages all of its outputs
// and names them once all are written. With PutOptions.DeferSync the two
// fsyncs are skipped and Sync (syncfs(2) on the root's filesystem) makes a
// whole batch durable at once: one flush instead of two per file.
//
// Compare-and-swap (catalog writes, lock objects) holds an exclusive flock on
// .distributor/cas.lock around the version check and the rename, which
// excludes other goroutines and processes on this machine. Versions are
// "sha256:<hex>" of the content, except for large files: those written by
// WriteIfVersion carry a stamp and are versioned by it and their stat
// (stamp.go); others that had not changed for a while when read are
// versioned by their stat (see statVersion). Neither needs a re-read. Do not delete the lock file while
// distributor runs; a new one would not exclude holders of the old one.
package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// ErrOutsideRoot is wrapped by the error for a path that leads through a
// symlink, and so possibly outside the root.
var ErrOutsideRoot = errors.New("path leads through a symlink")

const (
	tmpDir   = catalog.ReservedDir + "/tmp"
	lockName = catalog.ReservedDir + "/cas.lock"
)

// Backend is a destination root (or bundle location) on a local folder.
type Backend struct {
	root string      // absolute
	r    *os.Root    // opened once (safe for concurrent use): reopening it per operation cost two system calls an object
	held fs.FileInfo // the folder r holds (device and inode), for CheckRoot
	// rootFD is the root folder, opened once through r: stages start there.
	rootFD int
	// noTmpfile: the filesystem (or a missing /proc) does not allow
	// unnamed temp files; writes use named ones.
	noTmpfile atomic.Bool
	// settle is how long a file must have been unchanged for a stat version
	// (settled; tests shorten it).
	settle time.Duration
	// noOpenat2: the kernel has no openat2(2); reads take the general path.
	noOpenat2 atomic.Bool
	// noEmptyLink: linkat(2) refuses AT_EMPTY_PATH (a kernel before 6.10);
	// unnamed files are named through /proc.
	noEmptyLink atomic.Bool
	// noExchange: renameat2(2) refuses RENAME_EXCHANGE here; a stage's
	// replacements rename over the old file (displace.go).
	noExchange atomic.Bool
	// unnamed counts the unnamed files held open by stages, up to
	// maxUnnamed (half the process's open-file limit); past it, new paths
	// are staged under temp names.
	unnamed    atomic.Int64
	maxUnnamed int64
	// fresh holds the folders (root-relative) made since the last Sync
	// whose entry in their parent may not be durable yet: a durable write
	// below one flushes its parent too (fresh.go).
	fresh sync.Map
	// onSync, when set, is told of every fsync: kind "file" or "folder",
	// and the folder (tests).
	onSync func(kind, dir string)
	// onGeneral, when set, is told of every operation that took the
	// general os.Root path instead of openat2 (tests: a publication's
	// operations must not).
	onGeneral func(op string)
	// group, when set, shares Sync's syncfs with other roots' (SyncGroup).
	group *SyncGroup
	// groupFailures is how many of the group's flushes of the root's
	// filesystem had failed when the backend last learned of one (see
	// SyncGroup.sync).
	groupFailures atomic.Uint64
	// syncCalls numbers the calls of Sync as they begin; syncedThrough is
	// the highest number of one that succeeded. A write that returned
	// while syncCalls was n is durable once syncedThrough > n (prepare.go).
	syncCalls, syncedThrough atomic.Uint64

	// streamMin overrides defaultStreamMin when positive (WithStreamMinOutputs).
	streamMin int
	// pending are the catalogs the next Sync writes first (contract.go).
	pending pendingCatalogs

	bufs      sync.Pool // *[]byte copy buffers of bigBuf bytes
	smallBufs sync.Pool // *[]byte copy buffers of smallBuf bytes
	dirents   sync.Pool // *[]byte getdents(2) buffers of 8 KiB (as os.File uses)
}

var _ storage.Backend = (*Backend)(nil)

// Option tunes a Backend made by New.
type Option func(*Backend)

// WithSyncGroup makes the backend's Sync share its flush with the group's
// other backends on the same filesystem (SyncGroup).
func WithSyncGroup(g *SyncGroup) Option {
	return func(b *Backend) { b.group = g }
}

// New returns the backend for the existing folder root.
func New(root string, opts ...Option) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local root %q: %w", root, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		// Why, in the words of a stat (once per failure, not per open).
		fi, serr := os.Stat(abs)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			return nil, missingRoot(fmt.Sprintf("local root %s does not exist: create the folder first", abs))
		case serr == nil && !fi.IsDir():
			return nil, missingRoot(fmt.Sprintf("local root %s is not a folder", abs))
		}
		return nil, Classify(abs, fmt.Errorf("local root %s: %w", abs, err))
	}
	// The identity of what was opened: the path may change meanwhile.
	held, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("local root %s: %w", abs, err)
	}
	fd, err := rootHandle(r, abs, held)
	if err != nil {
		r.Close()
		return nil, Classify(abs, fmt.Errorf("local root %s: %w", abs, err))
	}
	b := &Backend{root: abs, r: r, held: held, rootFD: fd, settle: settled}
	b.bufs.New = func() any { buf := make([]byte, bigBuf); return &buf }
	b.smallBufs.New = func() any { buf := make([]byte, smallBuf); return &buf }
	b.dirents.New = func() any { buf := make([]byte, 8<<10); return &buf }
	for _, o := range opts {
		o(b)
	}
	if b.group != nil {
		// The flushes that failed before the backend existed are not its
		// own (as a handle opened now would not report them).
		b.group.sample(b.rootFD, &b.groupFailures)
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		b.maxUnnamed = int64(min(lim.Cur, 1<<30) / 2)
	}
	// linkat(2) names an unnamed file through its /proc/self/fd link.
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		b.noTmpfile.Store(true)
	}
	return b, nil
}

// rootHandle returns a descriptor of the folder r holds (held): the path
// opened once more, kept when it is still that folder (device and inode),
// else through r (os.File's poller set-up and a dup: five system calls
// more, per backend, so per bundle).
func rootHandle(r *os.Root, abs string, held fs.FileInfo) (int, error) {
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		var st unix.Stat_t
		if h, ok := held.Sys().(*syscall.Stat_t); ok && unix.Fstat(fd, &st) == nil && st.Dev == h.Dev && st.Ino == h.Ino {
			return fd, nil
		}
		unix.Close(fd) // another folder by now: the one r holds counts
	}
	d, err := r.Open(".")
	if err != nil {
		return -1, err
	}
	defer d.Close()
	return unix.FcntlInt(d.Fd(), unix.F_DUPFD_CLOEXEC, 0)
}

// missingRoot is a root path that names no folder; it matches
// storage.ErrRootMissing.
type missingRoot string

func (m missingRoot) Error() string { return string(m) }
func (m missingRoot) Unwrap() error { return storage.ErrRootMissing }

// CheckRoot reports whether the root path (following a symlinked root)
// still names the folder this backend holds open, by device and inode: one
// stat(2). A folder moved away keeps its handle valid, so without this check
// writes would silently follow it. ErrRootMissing when the path names no
// folder; ErrRootChanged when it names another one (open a new Backend).
func (b *Backend) CheckRoot(ctx context.Context) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Stat(b.root)
	switch {
	case isMissing(err):
		return missingRoot(fmt.Sprintf("destination root %s does not exist (moved or deleted?): recreate the folder or fix the destination's path", b.root))
	case err != nil:
		return fmt.Errorf("destination root %s: %w", b.root, err)
	case !fi.IsDir():
		return missingRoot(fmt.Sprintf("destination root %s is not a folder (moved or replaced?): recreate the folder or fix the destination's path", b.root))
	case !os.SameFile(fi, b.held):
		return fmt.Errorf("destination root %s: %w than the one opened (moved away and replaced, or a re-pointed link)", b.root, storage.ErrRootChanged)
	}
	return nil
}

// String returns the absolute root path.
func (b *Backend) String() string { return b.root }

// checkPath validates p and refuses it when any existing component of it is
// a symlink.
func (b *Backend) checkPath(r *os.Root, p string) error {
	b.tookGeneral("check " + p)
	if err := catalog.ValidatePath(p); err != nil {
		return fmt.Errorf("local root %s: %w", b.root, err)
	}
	for i := 0; i >= 0; {
		j := strings.IndexByte(p[i:], '/')
		name := p
		if j >= 0 {
			name, i = p[:i+j], i+j+1
		} else {
			i = -1
		}
		fi, err := r.Lstat(name)
		if isMissing(err) {
			return nil // nothing below can exist either
		}
		if err != nil {
			return fmt.Errorf("local root %s: %q: %w", b.root, name, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("local root %s: %q: %w %q; symlinks are refused so that nothing outside the root is touched",
				b.root, p, ErrOutsideRoot, name)
		}
	}
	return nil
}

// open validates p and opens the root for an operation on it.
func (b *Backend) open(p string) (*os.Root, error) {
	r := b.r
	if err := b.checkPath(r, p); err != nil {
		return nil, err
	}
	return r, nil
}

func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (b *Backend) notExist(p string) error {
	return fmt.Errorf("%q in %s: %w", p, b.root, storage.ErrNotExist)
}

// regular returns p's info when p is a regular file; a folder or nothing is
// ErrNotExist (folders are not objects).
func (b *Backend) regular(r *os.Root, p string) (fs.FileInfo, error) {
	fi, err := r.Lstat(p)
	switch {
	case isMissing(err):
		return nil, b.notExist(p)
	case err != nil:
		return nil, fmt.Errorf("%q in %s: %w", p, b.root, err)
	case fi.IsDir():
		return nil, b.notExist(p)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%q in %s is not a regular file (%s)", p, b.root, fi.Mode().Type())
	}
	return fi, nil
}

func info(p string, fi fs.FileInfo) storage.ObjectInfo {
	return storage.ObjectInfo{Path: p, Size: fi.Size(), ModTime: fi.ModTime(), Fingerprint: fingerprint(fi)}
}

// fingerprint names one stored version of a file: inode, size and
// modification time in nanoseconds. Every Put creates a new inode (temp file
// + rename), so a replaced file gets a new fingerprint even when the size
// and time happen to match.
func fingerprint(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return strconv.FormatUint(st.Ino, 10) + ":" + strconv.FormatInt(fi.Size(), 10) + ":" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// Stat returns the object's info; SHA256 is always empty (no metadata).
func (b *Backend) Stat(ctx context.Context, p string) (_ storage.ObjectInfo, err error) {
	defer b.classifyTo(&err)
	if oi, ok, err := b.statBeneath(p); ok {
		return oi, err
	}
	r, err := b.open(p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	fi, err := b.regular(r, p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return info(p, fi), nil
}

// Open streams the object's bytes.
func (b *Backend) Open(ctx context.Context, p string) (_ io.ReadCloser, err error) {
	defer b.classifyTo(&err)
	if rc, ok, err := b.readBeneath(p); ok {
		if err != nil {
			return nil, err
		}
		return rc, nil
	}
	r, err := b.open(p)
	if err != nil {
		return nil, err
	}
	fi, err := b.regular(r, p)
	if err != nil {
		return nil, err
	}
	f, err := r.Open(p)
	if isMissing(err) {
		return nil, b.notExist(p)
	}
	if err != nil {
		return nil, fmt.Errorf("open %q in %s: %w", p, b.root, err)
	}
	return sizedFile{File: f, size: fi.Size()}, nil
}

// sizedFile is an opened file that knows its size (storage.Sized) from the
// Lstat just before its open, as the openat2 path's fdFile knows it from
// its fstat: a hint for sizing buffers, not a promise.
type sizedFile struct {
	*os.File
	size int64
}

func (f sizedFile) Size() int64 { return f.size }

// Put writes r to p atomically and durably (unless opts.DeferSync): a
// stage of one object (stage.go).
//
// Conditions: IfAbsent links the finished (unnamed, or temp) file to p,
// which fails when anything is there (no-replace, atomic). IfMatch compares p's fingerprint
// right before the rename; POSIX has no atomic compare-and-rename, so a
// writer that replaces p between that check and the rename is not seen
// here: the new fingerprint tells the next reader that p changed.
func (b *Backend) Put(ctx context.Context, p string, src io.Reader, size int64, opts storage.PutOptions) (_ storage.ObjectInfo, err error) {
	defer b.classifyTo(&err)
	return b.writeAtomic(ctx, nil, p, src, size, !opts.DeferSync, opts)
}

// writeAtomic writes src to p through a stage of one object: p is
// untouched on any failure. (The root handle argument is unused: stages
// open folders themselves.)
func (b *Backend) writeAtomic(ctx context.Context, _ *os.Root, p string, src io.Reader, size int64, durable bool, cond storage.PutOptions) (storage.ObjectInfo, error) {
	cond.DeferSync = !durable
	s := b.newStage()
	defer s.Close()
	oi, err := s.put(ctx, p, src, size, cond)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := s.commit(ctx, p); err != nil {
		return storage.ObjectInfo{}, err
	}
	return oi, nil
}

// Sync flushes the root's filesystem (syncfs(2)): every Put made with
// DeferSync that has returned is durable afterwards.
func (b *Backend) Sync(ctx context.Context) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	b.pending.ready(ctx)
	made := b.freshFolders()
	n := b.syncCalls.Add(1)
	if b.group != nil {
		if err := b.group.sync(ctx, b.rootFD, &b.groupFailures); err != nil {
			return fmt.Errorf("sync %s: %w", b.root, err)
		}
	} else if err := unix.Syncfs(b.rootFD); err != nil {
		return fmt.Errorf("sync %s: %w", b.root, err)
	}
	b.forgetFresh(made) // syncfs flushed their entries too
	for v := b.syncedThrough.Load(); v < n && !b.syncedThrough.CompareAndSwap(v, n); v = b.syncedThrough.Load() {
	}
	return nil
}

func (b *Backend) syncDir(r *os.Root, dir string) error {
	if ok, err := b.syncDirAt(dir); ok {
		return err
	}
	b.tookGeneral("sync folder " + dir)
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync folder %q: %w", dir, err)
	}
	b.synced("folder", dir)
	return nil
}

// Delete removes the files, then the folders that became empty, up to (not
// including) the root. Missing paths and folder names are skipped. The
// removals are fsynced before Delete returns.
func (b *Backend) Delete(ctx context.Context, paths ...string) (err error) {
	defer b.classifyTo(&err)
	return b.delete(ctx, true, paths)
}

// DeleteDeferSync is Delete without the folders' fsync: Sync, or a durable write of the same path,
// makes the removal durable.
func (b *Backend) DeleteDeferSync(ctx context.Context, paths ...string) (err error) {
	defer b.classifyTo(&err)
	return b.delete(ctx, false, paths)
}

// SyncDeleted flushes the folders that held paths (storage.DeferredDeleter):
// the nearest one still there, since a removal also removes the folders
// it empties.
func (b *Backend) SyncDeleted(ctx context.Context, paths ...string) (err error) {
	defer b.classifyTo(&err)
	dirty := map[string]bool{}
	for _, p := range paths {
		if err := catalog.ValidatePath(p); err != nil {
			return fmt.Errorf("sync in %s: %w", b.root, err)
		}
		dir := path.Dir(p)
		for dir != "." {
			if fi, err := b.r.Lstat(dir); err == nil && fi.IsDir() {
				break
			}
			dir = path.Dir(dir)
		}
		dirty[dir] = true
	}
	for dir := range dirty {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.syncDir(b.r, dir); err != nil && !isMissing(err) {
			return fmt.Errorf("sync in %s: %w", b.root, err)
		}
	}
	return nil
}

func (b *Backend) delete(ctx context.Context, durable bool, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	for _, p := range paths {
		if err := catalog.ValidatePath(p); err != nil {
			return fmt.Errorf("delete in %s: %w", b.root, err)
		}
	}
	r := b.r
	dirty := map[string]bool{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The last component may itself be a link: unlink removes the
		// link, never its target. Its folders must not be links.
		if dir, ok, err := b.removeAt(p, ""); ok {
			if err != nil {
				return err
			}
			if dir != "" && durable {
				dirty[dir] = true
			}
			continue
		}
		if d := path.Dir(p); d != "." {
			if err := b.checkPath(r, d); err != nil {
				return err
			}
		}
		dir, err := b.remove(r, p)
		if err != nil {
			return err
		}
		if dir != "" && durable {
			dirty[dir] = true
		}
	}
	for dir := range dirty {
		if err := b.syncDir(r, dir); err != nil && !isMissing(err) {
			return fmt.Errorf("delete in %s: %w", b.root, err)
		}
	}
	return nil
}

// remove deletes the file p and its emptied folders and returns the folder
// left holding the change ("" when p was not there).
func (b *Backend) remove(r *os.Root, p string) (string, error) {
	b.tookGeneral("remove " + p)
	fi, err := r.Lstat(p)
	switch {
	case isMissing(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("delete %q in %s: %w", p, b.root, err)
	case fi.IsDir():
		return "", nil // folders are not objects
	}
	if err := r.Remove(p); err != nil && !isMissing(err) {
		return "", fmt.Errorf("delete %q in %s: %w", p, b.root, err)
	}
	dir := path.Dir(p)
	for dir != "." && r.Remove(dir) == nil {
		dir = path.Dir(dir)
	}
	return dir, nil
}

// List walks the objects under prefix in byte order of their paths. A prefix
// not ending in '/' is a plain string prefix (as on S3): "ab" matches "ab/x"
// and "abc". The temp area is skipped; reserved paths are the caller's.
func (b *Backend) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) (err error) {
	defer b.classifyTo(&err)
	dir := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = prefix[:i]
	}
	r := b.r
	if prefix != "" {
		check := strings.TrimSuffix(prefix, "/")
		if err := catalog.ValidatePath(check); err != nil {
			return fmt.Errorf("list in %s: prefix: %w", b.root, err)
		}
	}
	if dir == tmpDir || strings.HasPrefix(dir, tmpDir+"/") {
		return nil
	}
	if dir != "." {
		// openat2 refuses a link on the way; otherwise the general path
		// checks (and explains).
		fd, err := b.at(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		switch {
		case err == nil:
			return b.walk(ctx, r, dir, prefix, fn, fd)
		case plainMissing(err):
			return nil
		}
		if err := b.checkPath(r, dir); err != nil {
			return err
		}
	}
	return b.walk(ctx, r, dir, prefix, fn, -1)
}

// walk lists dir (its handle opened, or -1 to open it here; walk closes
// it) and the folders below it in path order.
func (b *Backend) walk(ctx context.Context, r *os.Root, dir, prefix string, fn func(storage.ObjectInfo) error, opened int) error {
	fd, closeDir, err := opened, func() { unix.Close(opened) }, error(nil)
	if opened < 0 {
		fd, closeDir, err = b.listedDir(r, dir)
	}
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %q in %s: %w", dir, b.root, err)
	}
	keep, err := b.listDir(fd, dir, prefix)
	closeDir()
	if errors.Is(err, syscall.ENOTDIR) {
		return nil // the prefix names a file's "folder"
	}
	if err != nil {
		return err
	}
	// Sorting with folders as "name/" gives whole-path byte order.
	slices.SortFunc(keep, func(a, b dirEntry) int { return strings.Compare(a.key, b.key) })
	for i := range keep {
		e := &keep[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.dir {
			if err := b.walk(ctx, r, strings.TrimSuffix(e.key, "/"), prefix, fn, -1); err != nil {
				return err
			}
			continue
		}
		if err := fn(statInfo(e.key, e.st)); err != nil {
			return err
		}
	}
	return nil
}

// dirEntry is one entry of a listed folder: its path (with '/' appended
// for folders) and its lstat.
type dirEntry struct {
	key string
	dir bool
	st  *unix.Stat_t // in a slice of the folder's: entries stay small to sort
}

// listDir returns the entries of folder d (at dir) that a listing of
// prefix shows or descends into, each lstat'ed once relative to d: names,
// then one fstatat each (no per-entry FileInfo, nor path resolution from
// the root).
func (b *Backend) listDir(fd int, dir, prefix string) ([]dirEntry, error) {
	names, err := b.readNames(fd, dir)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, err
		}
		return nil, fmt.Errorf("list %q in %s: %w", dir, b.root, err)
	}
	keep := make([]dirEntry, 0, len(names))
	sts := make([]unix.Stat_t, len(names))
	errs := statAll(fd, names, sts)
	for i, name := range names {
		e := dirEntry{key: name, st: &sts[i]}
		if dir != "." {
			e.key = dir + "/" + name
		}
		if err := errs[i]; isMissing(err) {
			continue // deleted while listing
		} else if err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", e.key, b.root, err)
		}
		if e.dir = e.st.Mode&unix.S_IFMT == unix.S_IFDIR; e.dir {
			e.key += "/"
			// Descend when the folder is under the prefix or the prefix
			// is inside it.
			if e.key == tmpDir+"/" || !strings.HasPrefix(e.key, prefix) && !strings.HasPrefix(prefix, e.key) {
				continue
			}
		} else if catalog.IsTempName(name) || !strings.HasPrefix(e.key, prefix) {
			// A temp name is a write in flight (or a crashed one's
			// leftover). Regular files are objects. Symlinks, sockets and
			// devices are listed too (never followed): they occupy a path,
			// so a publication that wants it must see a collision, and a
			// legacy replacement clears them like any other leftover.
			continue
		}
		keep = append(keep, e)
	}
	return keep, nil
}

// parallelStats is the size from which a folder's entries are stat'ed by
// two goroutines: on two cores a listing of 10,000 files spent most of its
// time in the kernel's stat, one core's worth.
const parallelStats = 128

// statAll lstats each name in the folder fd into sts, returning each one's
// error.
func statAll(fd int, names []string, sts []unix.Stat_t) []error {
	errs := make([]error, len(names))
	stat := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			errs[i] = fstatat(fd, names[i], &sts[i])
		}
	}
	if len(names) < parallelStats {
		stat(0, len(names))
		return errs
	}
	half := len(names) / 2
	var wg sync.WaitGroup
	wg.Go(func() { stat(half, len(names)) })
	stat(0, half)
	wg.Wait()
	return errs
}

// fstatat is lstat of name in the folder fd.
func fstatat(fd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Version returns the compare-and-swap version of content: "sha256:<hex>".
func Version(data []byte) storage.Version {
	sum := sha256.Sum256(data)
	return storage.Version(catalog.Digest(sum[:]))
}

// statVersionMin is the size from which a file settled on disk is versioned
// by its stat instead of its content: checking a half-gigabyte catalog's
// version by re-reading and hashing it cost as much as planning.
const statVersionMin = 1 << 20

// settled is how long before a read a file must have last changed (mtime
// and ctime) for its stat to stand for its content. A change after the read
// then sets a later time, even on file systems with coarse timestamps; a
// file changed more recently may still be rewritten in place within one
// timestamp tick, unseen by stat, so it is versioned by content (racy-git).
const settled = 2 * time.Second

// statVersion names one stored file version: device, inode, size, mtime and
// ctime in nanoseconds. A replacement has another inode or a later ctime,
// an in-place write a later mtime and ctime.
func statVersion(fi fs.FileInfo) (storage.Version, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return storage.Version(fmt.Sprintf("stat:%d:%d:%d:%d:%d", st.Dev, st.Ino, st.Size,
		st.Mtim.Nano(), st.Ctim.Nano())), true
}

// readVersion returns p's bytes and version (nil, "" when missing). The
// version is statVersion for a large file that had settled when the read
// began, else the content digest.
func (b *Backend) readVersion(r *os.Root, p string) ([]byte, storage.Version, error) {
	if _, err := b.regular(r, p); errors.Is(err, storage.ErrNotExist) {
		return nil, "", nil
	} else if err != nil {
		return nil, "", err
	}
	begin := time.Now()
	f, err := r.Open(p)
	if isMissing(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	// The stamp before the stat (stamp.go); both of the opened file,
	// whatever replaces p meanwhile.
	stamped, hasStamp := stampedVersion(int(f.Fd()))
	fi, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%q in %s is not a regular file (%s)", p, b.root, fi.Mode().Type())
	}
	data := make([]byte, 0, fi.Size()+1) // +1: EOF without a second buffer
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, 64<<10)
		}
	}
	if hasStamp && int64(len(data)) == fi.Size() {
		return data, stamped, nil
	}
	if int64(len(data)) == fi.Size() && fi.Size() >= statVersionMin && settledBefore(fi, begin.Add(-b.settle)) {
		if v, ok := statVersion(fi); ok {
			return data, v, nil
		}
	}
	return data, Version(data), nil
}

// settledBefore reports whether fi's content and metadata last changed
// before limit.
func settledBefore(fi fs.FileInfo, limit time.Time) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return time.Unix(st.Mtim.Unix()).Before(limit) && time.Unix(st.Ctim.Unix()).Before(limit)
}

// currentIs reports whether p's current version is want, under the lock.
// A stat version is checked by stat alone; a content version by content.
func (b *Backend) currentIs(r *os.Root, p string, want storage.Version) (bool, error) {
	if strings.HasPrefix(string(want), "stamp:") {
		return b.currentStamped(r, p, want)
	}
	if want == "" || strings.HasPrefix(string(want), "stat:") {
		fi, err := b.regular(r, p)
		if errors.Is(err, storage.ErrNotExist) {
			return want == "", nil
		}
		if err != nil {
			return false, err
		}
		v, _ := statVersion(fi)
		return v == want, nil
	}
	_, cur, err := b.readVersionByContent(r, p)
	if err != nil {
		return false, err
	}
	return cur == want, nil
}

// readVersionByContent is the content version (or "" when missing).
func (b *Backend) readVersionByContent(r *os.Root, p string) ([]byte, storage.Version, error) {
	if _, err := b.regular(r, p); errors.Is(err, storage.ErrNotExist) {
		return nil, "", nil
	} else if err != nil {
		return nil, "", err
	}
	data, err := r.ReadFile(p)
	if isMissing(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	return data, Version(data), nil
}

// ReadVersion returns the object's bytes and version; (nil, "", nil) when
// it is missing.
func (b *Backend) ReadVersion(ctx context.Context, p string) (_ []byte, _ storage.Version, err error) {
	defer b.classifyTo(&err)
	if data, v, ok, err := b.readVersionAt(p); ok {
		return data, v, err
	}
	r, err := b.open(p)
	if err != nil {
		return nil, "", err
	}
	return b.readVersion(r, p)
}

// lock takes the root's compare-and-swap lock. flock locks belong to the
// open file, so this excludes other goroutines as well as other processes.
func (b *Backend) lock(ctx context.Context) (unlock func(), err error) {
	fd, ok, err := b.openLockAt()
	if err != nil {
		return nil, err
	}
	if !ok {
		if fd, err = b.openLockGeneral(); err != nil {
			return nil, err
		}
	}
	return b.flock(ctx, fd)
}

// flock takes the exclusive flock on the lock file fd, polling until ctx
// ends; unlock closes fd (also on failure, fd is closed).
func (b *Backend) flock(ctx context.Context, fd int) (unlock func(), err error) {
	closeFD := func() { unix.Close(fd) } // closing releases the lock
	wait := time.Millisecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return closeFD, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			closeFD()
			return nil, fmt.Errorf("lock %s in %s: %w", lockName, b.root, err)
		}
		// Poll instead of blocking so that ctx can end the wait.
		select {
		case <-ctx.Done():
			closeFD()
			return nil, fmt.Errorf("lock %s in %s: %w", lockName, b.root, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// openLockGeneral opens the lock file through the root (os.Root), making
// its folder first, and returns a descriptor of its own.
func (b *Backend) openLockGeneral() (int, error) {
	b.tookGeneral("lock")
	switch err := b.r.Mkdir(catalog.ReservedDir, 0o755); {
	case err == nil:
		b.fresh.Store(catalog.ReservedDir, struct{}{})
	case !errors.Is(err, fs.ErrExist):
		return -1, fmt.Errorf("lock in %s: %w", b.root, err)
	}
	f, err := b.r.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return -1, fmt.Errorf("lock in %s: %w", b.root, err)
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("lock in %s: %w", b.root, err)
	}
	return fd, nil
}

// WriteIfVersion writes data at p only if p's current version is want (""
// = must not exist), durably.
func (b *Backend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version) (_ storage.Version, err error) {
	defer b.classifyTo(&err)
	return b.writeIfVersion(ctx, p, data, want, true)
}

// WriteIfVersionNoSync is WriteIfVersion without the fsyncs
// (storage.Unsynced): the lock object's write costs no flush.
func (b *Backend) WriteIfVersionNoSync(ctx context.Context, p string, data []byte, want storage.Version) (_ storage.Version, err error) {
	defer b.classifyTo(&err)
	return b.writeIfVersion(ctx, p, data, want, false)
}

// lockAt opens the root for p, takes the compare-and-swap lock and checks
// that p is at version want (verb names the operation in the conflict).
// The caller must call unlock.
func (b *Backend) lockAt(ctx context.Context, verb, p string, want storage.Version) (r *os.Root, unlock func(), err error) {
	if err := catalog.ValidatePath(p); err != nil {
		return nil, nil, fmt.Errorf("local root %s: %w", b.root, err)
	}
	// The lock file made by the first compare-and-swap is opened as it is;
	// until then, the path is checked before the lock is made, so that a
	// refused write leaves nothing behind.
	if fd, oerr := b.at(lockName, unix.O_RDWR, 0); oerr == nil {
		unlock, err = b.flock(ctx, fd)
	} else {
		if err := b.checkPathAt(p); err != nil {
			return nil, nil, err
		}
		unlock, err = b.lock(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	same, ok, err := b.currentIsAt(p, want)
	if !ok && err == nil {
		// A link on the way, or no openat2: the general path checks and
		// explains.
		if r, err = b.open(p); err == nil {
			same, err = b.currentIs(r, p, want)
		}
	}
	if err != nil || !same {
		unlock()
		if err == nil {
			err = fmt.Errorf("%s %q in %s: %w", verb, p, b.root, storage.ErrConflict)
		}
		return nil, nil, err
	}
	return b.r, unlock, nil
}

func (b *Backend) writeIfVersion(ctx context.Context, p string, data []byte, want storage.Version, durable bool) (storage.Version, error) {
	r, unlock, err := b.lockAt(ctx, "write", p, want)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Where nothing is (checked under the lock), an unnamed file linked
	// into place: no temp name and no rename, and it never replaces
	// what another program may have put there meanwhile.
	if _, err := b.writeAtomic(ctx, r, p, bytes.NewReader(data), int64(len(data)), durable, storage.PutOptions{IfAbsent: want == ""}); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", p, b.root, err)
	}
	if len(data) >= statVersionMin {
		if v, ok := b.stamp(r, p); ok {
			return v, nil
		}
	}
	return Version(data), nil
}

// DeleteIfVersion deletes p only if its version is want, durably. want ""
// on a missing object matches and does nothing.
func (b *Backend) DeleteIfVersion(ctx context.Context, p string, want storage.Version) (err error) {
	defer b.classifyTo(&err)
	return b.deleteIfVersion(ctx, p, want, true)
}

// DeleteIfVersionNoSync is DeleteIfVersion without the fsync of the folder
// (storage.Unsynced).
func (b *Backend) DeleteIfVersionNoSync(ctx context.Context, p string, want storage.Version) (err error) {
	defer b.classifyTo(&err)
	return b.deleteIfVersion(ctx, p, want, false)
}

func (b *Backend) deleteIfVersion(ctx context.Context, p string, want storage.Version, durable bool) error {
	r, unlock, err := b.lockAt(ctx, "delete", p, want)
	if err != nil {
		return err
	}
	defer unlock()
	if want == "" {
		return nil
	}
	// The lock file is in the reserved folder, so it never empties.
	dir, ok, err := b.removeAt(p, catalog.ReservedDir)
	if !ok {
		dir, err = b.remove(r, p)
	}
	if err != nil || !durable || dir == "" {
		return err
	}
	return b.syncDir(r, dir)
}
