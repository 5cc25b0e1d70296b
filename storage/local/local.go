// Package local is the storage.Backend on a local folder.
//
// Two implementations carry out the operations behind one seam (impl): the
// Linux one (the _linux.go files), on descriptors below the root's handle,
// and the portable one (portable.go), on os.Root alone, which every other
// system runs and which Portable selects on Linux. Both confine paths, check
// conditions and name errors alike, and both pass the storage contract
// suite; what differs is how many system calls and flushes a write costs and
// what a killed write of a new path leaves (nothing, or a temp name).
//
// Confinement: every path is checked with catalog.ValidatePath and every
// operation resolves it below the folder's handle, with openat2(2)
// (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, at_linux.go) or, where that does
// not answer plainly and in the portable implementation, through an os.Root
// opened on the folder, so nothing outside it can be reached. On top of
// that, any path with a symlink in it (folder or final name) is refused with
// storage.ErrSymlink: the simplest rule that cannot be talked into writing
// through a link, even one that points inside the root today and elsewhere
// tomorrow. List skips symlinks and other non-regular files.
//
// Writes go to a temp file beside the target (named catalog.TempPrefix+random,
// never listed), are fsynced, renamed over the target and the target's folder is fsynced, so an
// object is durable when Put returns. On Linux, writes of new paths (PutOptions.IfAbsent)
// use an unnamed file instead (O_TMPFILE, named by linkat(2) when complete):
// a killed process leaves no temp name behind for them. A killed replacing
// write does; Leftovers finds those. Every write is a stage (stage.go): a
// Put is a stage of one object, a publication stages all of its outputs
// and names them once all are written. On Linux, with PutOptions.DeferSync
// the two fsyncs are skipped and Sync (syncfs(2) on the root's filesystem)
// makes a whole batch durable at once: one flush instead of two per file.
// The portable implementation has no such flush: every write there is
// durable when it returns (DeferSync defers nothing), and a new path is
// named by a hard link from its temp file, which never replaces anything.
// Windows cannot flush a folder: there a new or removed name is durable
// only once NTFS writes its metadata back (the files themselves are
// flushed).
//
// Compare-and-swap (catalog writes, lock objects) holds an exclusive lock on
// .distributor/cas.lock around the version check and the rename (flock on
// Unix, LockFileEx on Windows), which excludes other goroutines and
// processes on this machine. Versions are "sha256:<hex>" of the content; on
// Linux, large files are versioned without a re-read: those written by
// WriteIfVersion carry a stamp and are versioned by it and their stat
// (stamp_linux.go); others that had not changed for a while when read are
// versioned by their stat (see statVersion). Do not delete the lock file while
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

const (
	tmpDir   = catalog.ReservedDir + "/tmp"
	lockName = catalog.ReservedDir + "/cas.lock"
)

// Backend is a destination root (or bundle location) on a local folder.
type Backend struct {
	root string      // absolute
	r    *os.Root    // opened once (safe for concurrent use): reopening it per operation cost two system calls an object
	held fs.FileInfo // the folder r holds (device and inode), for CheckRoot

	// sys carries out the operations: the Linux implementation or the
	// portable one (impl).
	sys impl

	// portable: made with Portable.
	portable bool

	// fresh holds the folders (root-relative) made since the last Sync
	// whose entry in their parent may not be durable yet: a durable write
	// below one flushes its parent too (fresh.go).
	fresh sync.Map

	// onSync, when set, is told of every fsync: kind "file" or "folder",
	// and the folder (a test's option).
	onSync func(kind, dir string)

	// onGeneral, when set, is told of every operation that took the
	// general os.Root path instead of openat2 (a test's option: a
	// publication's operations must not).
	onGeneral func(op string)

	// group, when set, shares Sync's syncfs with other roots' (SyncGroup).
	group *SyncGroup

	// streamMin overrides defaultStreamMin when positive (WithStreamMinOutputs).
	streamMin int

	// pending are the catalogs the next Sync writes first (contract.go).
	pending pendingCatalogs

	// dirty: a change that returned since the last Sync may not be
	// durable yet (a write with DeferSync, a stage); Sync flushes the
	// root. emptied are the files emptied in place with DeferSync since
	// then: alone, Sync flushes only them (dirty.go).
	dirty dirtySet

	bufs      sync.Pool // *[]byte copy buffers of bigBuf bytes
	smallBufs sync.Pool // *[]byte copy buffers of smallBuf bytes

	// linuxState is the Linux implementation's (local_linux.go); empty
	// elsewhere.
	linuxState //nolint:unused // read by the _linux.go files only
}

// impl is the seam between the operations and the system: each method is
// one step that the Linux implementation (linuxImpl, the _linux.go files)
// takes on descriptors below the root's handle and the portable one
// (portableImpl, portable.go) takes through os.Root. Each checks the paths
// it is given (catalog.ValidatePath, no symlink on the way); the callers
// classify the errors (Classify).
type impl interface {
	// stat is Stat; open is Open.
	stat(p string) (storage.ObjectInfo, error)
	open(p string) (io.ReadCloser, error)

	// readVersion is ReadVersion.
	readVersion(p string) ([]byte, storage.Version, error)

	// versionBeforeRead is the version of rc (opened by open at begin)
	// that readVersion would give it whole, where known before reading it
	// (for size bytes); ok is false when only its content tells.
	versionBeforeRead(rc io.ReadCloser, begin time.Time) (v storage.Version, size int64, ok bool)

	// list calls fn for the objects under prefix below dir (prefix's
	// folder, "." for the root), in path order.
	list(ctx context.Context, dir, prefix string, fn func(storage.ObjectInfo) error) error

	// remove deletes the file p and the folders it empties, up to (not
	// including) stop or the root, and returns the folder left holding
	// the change ("" when p was not there).
	remove(p, stop string) (dir string, err error)

	// syncDir flushes the folder dir's entries.
	syncDir(dir string) error

	// sync makes every write that has returned durable (Sync).
	sync(ctx context.Context) error

	// lockAt takes the compare-and-swap lock and checks that p is at
	// version want (ErrConflict, naming verb, otherwise); the caller
	// must call unlock.
	lockAt(ctx context.Context, verb, p string, want storage.Version) (unlock func(), err error)

	// lock takes the compare-and-swap lock alone (the intent's writes).
	lock(ctx context.Context) (unlock func(), err error)

	// stamp gives the file at p, just written under the lock, a version
	// that needs no re-read; ok is false when it cannot.
	stamp(p string) (_ storage.Version, ok bool)

	// newStage begins a stage (stage.go); displace as for Stage.
	newStage(displace bool) stager

	// prepare and prepareFrom are prepareBytes and prepareStream.
	prepare(ctx context.Context, p string, data []byte) (preparedVersion, error)
	prepareFrom(ctx context.Context, p string, write func(io.Writer) error) (preparedVersion, error)

	// writable runs fn on the regular file p opened for an in-place
	// write, with its current bytes when read is set (inplace.go).
	writable(p string, read bool, fn func(f rwFile, cur []byte) error) error
}

var _ storage.Backend = (*Backend)(nil)

// Option tunes a Backend made by New.
type Option func(*Backend)

// WithSyncGroup makes the backend's Sync share its flush with the group's
// other backends on the same filesystem (SyncGroup).
func WithSyncGroup(g *SyncGroup) Option {
	return func(b *Backend) { b.group = g }
}

// Portable makes New use the portable implementation on Linux too: the one
// every other system runs (os.Root, a temp file renamed or linked into
// place, an fsync per file and folder), without openat2, unnamed files,
// syncfs or extended attributes. Elsewhere it changes nothing.
func Portable() Option {
	return func(b *Backend) { b.portable = true }
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
	b := &Backend{root: abs, r: r, held: held}
	b.bufs.New = func() any { buf := make([]byte, bigBuf); return &buf }
	b.smallBufs.New = func() any { buf := make([]byte, smallBuf); return &buf }
	for _, o := range opts {
		o(b)
	}
	b.sys = portableImpl{b}
	if !b.portable {
		if b.sys, err = nativeImpl(b); err != nil {
			r.Close()
			return nil, err
		}
	}
	return b, nil
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

// Held is the identity of the folder the backend holds open (compare it
// with os.SameFile): what New opened, whatever the path names since.
func (b *Backend) Held() fs.FileInfo { return b.held }

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
				b.root, p, storage.ErrSymlink, name)
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

// tookGeneral tells the test hook of an operation on the general path.
func (b *Backend) tookGeneral(op string) {
	if b.onGeneral != nil {
		b.onGeneral(op)
	}
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

// info is the object info of the file name (root-relative) described by
// fi, stored at p (name itself, or the temp name it has until committed).
func (b *Backend) info(p, name string, fi fs.FileInfo) storage.ObjectInfo {
	return storage.ObjectInfo{Path: p, Size: fi.Size(), ModTime: fi.ModTime(), Fingerprint: fingerprint(b.r, name, fi),
		Symlink: fi.Mode()&fs.ModeSymlink != 0}
}

// fingerprint names one stored version of a file: its file id (the inode),
// size and modification time in nanoseconds. Every Put creates a new file
// (temp file + rename), so a replaced file gets a new fingerprint even when
// the size and time happen to match. name is fi's file in r, where the
// system has no file id in fi (Windows).
func fingerprint(r *os.Root, name string, fi fs.FileInfo) string {
	id, ok := fileID(r, name, fi)
	if !ok {
		return ""
	}
	return strconv.FormatUint(id, 10) + ":" + strconv.FormatInt(fi.Size(), 10) + ":" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// Stat returns the object's info; SHA256 is always empty (no metadata).
func (b *Backend) Stat(ctx context.Context, p string) (_ storage.ObjectInfo, err error) {
	defer b.classifyTo(&err)
	return b.sys.stat(p)
}

// Open streams the object's bytes, with the size the file had when
// opened (with Versioned: openVersion).
func (b *Backend) Open(ctx context.Context, p string, opts ...storage.Option) (_ storage.Reader, err error) {
	if storage.HasOption(opts, storage.Versioned) {
		return b.openVersion(ctx, p)
	}
	defer b.classifyTo(&err)
	rc, err := b.sys.open(p)
	if err != nil {
		return storage.Reader{}, err
	}
	size := int64(-1)
	if s, ok := rc.(sizer); ok {
		size = s.Size()
	}
	return storage.Reader{ReadCloser: rc, Size: size}, nil
}

// sizer is an opened file that knows its size (sizedFile, fdFile).
type sizer interface{ Size() int64 }

// sizedFile is an opened file that knows its size (sizer) from the
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
//
// With opts.InPlace (and no condition), the object's bytes are rewritten
// in place (inplace.go): one open, a write and a truncation, no new file
// and no rename.
func (b *Backend) Put(ctx context.Context, p string, src io.Reader, size int64, opts storage.PutOptions) (_ storage.ObjectInfo, err error) {
	defer b.classifyTo(&err)
	if opts.InPlace && !opts.IfAbsent && opts.IfMatch == "" {
		return b.putInPlace(ctx, p, src, size, !opts.DeferSync)
	}
	oi, err := b.writeAtomic(ctx, nil, p, src, size, !opts.DeferSync, opts)
	if err == nil && opts.DeferSync {
		b.dirty.mark()
	}
	return oi, err
}

// writeAtomic writes src to p through a stage of one object: p is
// untouched on any failure. (The root handle argument is unused: stages
// open folders themselves.)
func (b *Backend) writeAtomic(ctx context.Context, _ *os.Root, p string, src io.Reader, size int64, durable bool, cond storage.PutOptions) (storage.ObjectInfo, error) {
	cond.DeferSync = !durable
	s := b.sys.newStage(false)
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

// Sync makes every change made with DeferSync that has returned durable:
// on Linux one flush of the root's filesystem (syncfs(2)), or, when only
// files changed in place are dirty, a flush of each (dirty.go); the
// portable implementation made each durable as it returned.
func (b *Backend) Sync(ctx context.Context) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	t := b.dirty.take()
	if !t.all && !b.hasFresh() {
		// Nothing else changed since the last Sync. A pending catalog
		// not readied here is made durable by its own commit.
		if err := b.syncFew(ctx, t.files, t.dirs); err != nil {
			return err
		}
		b.dirty.done(t, false)
		return nil
	}
	b.pending.ready(ctx)
	if err := b.sys.sync(ctx); err != nil {
		return err
	}
	b.dirty.done(t, true)
	return nil
}

// Delete removes the files, then the folders that became empty, up to (not
// including) the root. Missing paths and folder names are skipped. The
// removals are fsynced before Delete returns.
func (b *Backend) Delete(ctx context.Context, paths ...string) (err error) {
	defer b.classifyTo(&err)
	return b.delete(ctx, true, paths)
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
	dirty := map[string]bool{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}

		// The last component may itself be a link: unlink removes the
		// link, never its target. Its folders must not be links.
		dir, err := b.sys.remove(p, "")
		if err != nil {
			return err
		}
		if dir != "" && durable {
			dirty[dir] = true
		}
	}
	for dir := range dirty {
		if err := b.sys.syncDir(dir); err != nil && !isMissing(err) {
			return fmt.Errorf("delete in %s: %w", b.root, err)
		}
	}
	return nil
}

// removeGeneral is remove through the root (os.Root): p's folders are
// checked for links first.
func (b *Backend) removeGeneral(p string) (string, error) {
	if d := path.Dir(p); d != "." {
		if err := b.checkPath(b.r, d); err != nil {
			return "", err
		}
	}
	return b.remove(b.r, p)
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
	if prefix != "" {
		check := strings.TrimSuffix(prefix, "/")
		if err := catalog.ValidatePath(check); err != nil {
			return fmt.Errorf("list in %s: prefix: %w", b.root, err)
		}
	}
	if dir == tmpDir || strings.HasPrefix(dir, tmpDir+"/") {
		return nil
	}
	return b.sys.list(ctx, dir, prefix, fn)
}

// listed reports whether a listing of prefix shows the entry name at key
// (its path) or, for a folder (dir, key ending in '/'), descends into it.
func listed(name, key string, dir bool, prefix string) bool {
	if dir {
		// Descend when the folder is under the prefix or the prefix
		// is inside it.
		return key != tmpDir+"/" && (strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key))
	}

	// A temp name is a write in flight (or a crashed one's leftover).
	// Regular files are objects. Symlinks, sockets and devices are listed
	// too (never followed): they occupy a path, so a publication that
	// wants it must see a collision, and a legacy replacement clears them
	// like any other leftover.
	return !catalog.IsTempName(name) && strings.HasPrefix(key, prefix)
}

// Version returns the compare-and-swap version of content: "sha256:<hex>".
func Version(data []byte) storage.Version {
	sum := sha256.Sum256(data)
	return storage.Version(catalog.Digest(sum[:]))
}

// statVersionMin is the size from which a file is versioned without a
// re-read where the system allows it (a stamp or a settled stat, Linux):
// checking a half-gigabyte catalog's version by re-reading and hashing it
// cost as much as planning.
const statVersionMin = 1 << 20

// versionByContent is the content version (or "" when missing), the
// digest made as the bytes stream by: a large file is not held for it.
func (b *Backend) versionByContent(r *os.Root, p string) (storage.Version, error) {
	if _, err := b.regular(r, p); errors.Is(err, storage.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	f, err := r.Open(p)
	if isMissing(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	v, err := contentVersion(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("read %q in %s: %w", p, b.root, err)
	}
	return v, nil
}

// contentVersion is Version of what r holds (about size bytes), read in
// pieces of at most 256 KiB.
func contentVersion(r io.Reader, size int64) (storage.Version, error) {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, r, make([]byte, min(max(size, 0)+1, 256<<10))); err != nil {
		return "", err
	}
	return storage.Version(catalog.Digest(h.Sum(nil))), nil
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
// it is missing. Under storage.InPlace the version is the content's, and
// an empty file is none.
func (b *Backend) ReadVersion(ctx context.Context, p string, opts ...storage.Option) (_ []byte, _ storage.Version, err error) {
	defer b.classifyTo(&err)
	data, v, err := b.sys.readVersion(p)
	if err != nil || v == "" || !storage.HasOption(opts, storage.InPlace) {
		return data, v, err
	}
	if len(data) == 0 {
		return nil, "", nil
	}
	return data, Version(data), nil
}

// WriteIfVersion writes data at p only if p's current version is want (""
// = must not exist), durably unless opts hold storage.DeferSync (the lock
// object's write then costs no flush). Under storage.InPlace the file is
// rewritten in place (inplace.go).
func (b *Backend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (_ storage.Version, err error) {
	defer b.classifyTo(&err)
	durable := !storage.HasOption(opts, storage.DeferSync)
	if storage.HasOption(opts, storage.InPlace) {
		return b.rewriteIfVersion(ctx, p, data, want, durable)
	}
	return b.writeIfVersion(ctx, p, data, want, durable)
}

func (b *Backend) writeIfVersion(ctx context.Context, p string, data []byte, want storage.Version, durable bool) (storage.Version, error) {
	unlock, err := b.sys.lockAt(ctx, "write", p, want)
	if err != nil {
		return "", err
	}
	defer unlock()

	// Where nothing is (checked under the lock), a file linked into place:
	// it never replaces what another program may have put there meanwhile.
	if _, err := b.writeAtomic(ctx, b.r, p, bytes.NewReader(data), int64(len(data)), durable, storage.PutOptions{IfAbsent: want == ""}); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", p, b.root, err)
	}
	if !durable {
		b.dirty.entry(p)
	}
	if len(data) >= statVersionMin {
		if v, ok := b.sys.stamp(p); ok {
			return v, nil
		}
	}
	return Version(data), nil
}

// DeleteIfVersion deletes p only if its version is want, durably unless
// opts hold storage.DeferSync. want "" on a missing object matches and
// does nothing. Under storage.InPlace the file is emptied in place
// (inplace.go).
func (b *Backend) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) (err error) {
	defer b.classifyTo(&err)
	durable := !storage.HasOption(opts, storage.DeferSync)
	if storage.HasOption(opts, storage.InPlace) {
		return b.emptyIfVersion(ctx, p, want, durable)
	}
	return b.deleteIfVersion(ctx, p, want, durable)
}

func (b *Backend) deleteIfVersion(ctx context.Context, p string, want storage.Version, durable bool) error {
	unlock, err := b.sys.lockAt(ctx, "delete", p, want)
	if err != nil {
		return err
	}
	defer unlock()
	if want == "" {
		return nil
	}

	// The lock file is in the reserved folder, so it never empties.
	dir, err := b.sys.remove(p, catalog.ReservedDir)
	if err == nil && !durable {
		b.dirty.entry(p)
	}
	if err != nil || !durable || dir == "" {
		return err
	}
	return b.sys.syncDir(dir)
}
