package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// linuxState is the Linux implementation's part of a Backend.
type linuxState struct {
	// rootFD is the root folder, opened once through r: stages start there.
	rootFD int

	// noTmpfile: the filesystem (or a missing /proc) does not allow
	// unnamed temp files; writes use named ones.
	noTmpfile atomic.Bool

	// settle is how long a file must have been unchanged for a stat version
	// (settled, unless a test's option set it).
	settle time.Duration

	// noOpenat2: the kernel has no openat2(2); reads take the general path.
	noOpenat2 atomic.Bool

	// noEmptyLink: linkat(2) refuses AT_EMPTY_PATH (a kernel before 6.10);
	// unnamed files are named through /proc.
	noEmptyLink atomic.Bool

	// noExchange: renameat2(2) refuses RENAME_EXCHANGE here; a stage's
	// replacements rename over the old file (displace_linux.go).
	noExchange atomic.Bool

	// unnamed counts the unnamed files held open by stages, up to
	// maxUnnamed (half the process's open-file limit); past it, new paths
	// are staged under temp names.
	unnamed    atomic.Int64
	maxUnnamed int64

	// groupFailures is how many of the group's flushes of the root's
	// filesystem had failed when the backend last learned of one (see
	// SyncGroup.sync).
	groupFailures atomic.Uint64

	// syncCalls numbers the calls of Sync as they begin; syncedThrough is
	// the highest number of one that succeeded. A write that returned
	// while syncCalls was n is durable once syncedThrough > n (prepare_linux.go).
	syncCalls, syncedThrough atomic.Uint64

	dirents sync.Pool // *[]byte getdents(2) buffers of 8 KiB (as os.File uses)
}

// nativeImpl sets up the Linux implementation for b: the root's
// descriptor, the open-file share for unnamed files and whether /proc can
// name them.
func nativeImpl(b *Backend) (impl, error) {
	fd, err := rootHandle(b.r, b.root, b.held)
	if err != nil {
		return nil, Classify(b.root, fmt.Errorf("local root %s: %w", b.root, err))
	}
	b.rootFD = fd
	if b.settle == 0 {
		b.settle = settled
	}
	b.dirents.New = func() any { buf := make([]byte, 8<<10); return &buf }
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
	return linuxImpl{b}, nil
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

// linuxImpl is the Linux implementation (impl): openat2 below the root's
// handle (at_linux.go, beneath_linux.go), stages of unnamed files
// (stage_linux.go), one syncfs per batch, stamps (stamp_linux.go). Where
// its fast path does not answer plainly it takes the general path, which
// is the portable implementation's or, for versions, its own.
type linuxImpl struct{ b *Backend }

// general is the path taken where the fast one does not answer plainly,
// where that is the portable implementation's.
func (l linuxImpl) general() portableImpl { return portableImpl(l) }

func (l linuxImpl) stat(p string) (storage.ObjectInfo, error) {
	if oi, ok, err := l.b.statBeneath(p); ok {
		return oi, err
	}
	return l.general().stat(p)
}

func (l linuxImpl) open(p string) (io.ReadCloser, error) {
	if rc, ok, err := l.b.readBeneath(p); ok {
		if err != nil {
			return nil, err
		}
		return rc, nil
	}
	return l.general().open(p)
}

func (l linuxImpl) readVersion(p string) ([]byte, storage.Version, error) {
	b := l.b
	if data, v, ok, err := b.readVersionAt(p); ok {
		return data, v, err
	}
	r, err := b.open(p)
	if err != nil {
		return nil, "", err
	}
	return b.readVersion(r, p)
}

func (l linuxImpl) list(ctx context.Context, dir, prefix string, fn func(storage.ObjectInfo) error) error {
	b := l.b
	r := b.r
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

func (l linuxImpl) remove(p, stop string) (string, error) {
	if dir, ok, err := l.b.removeAt(p, stop); ok {
		return dir, err
	}
	return l.b.removeGeneral(p)
}

func (l linuxImpl) syncDir(dir string) error {
	if ok, err := l.b.syncDirAt(dir); ok {
		return err
	}
	return l.general().syncDir(dir)
}

// sync flushes the root's filesystem (syncfs(2)), or has the group do it.
func (l linuxImpl) sync(ctx context.Context) error {
	b := l.b
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

func (l linuxImpl) lock(ctx context.Context) (func(), error) { return l.b.lock(ctx) }

func (l linuxImpl) lockAt(ctx context.Context, verb, p string, want storage.Version) (func(), error) {
	_, unlock, err := l.b.lockAt(ctx, verb, p, want)
	return unlock, err
}

func (l linuxImpl) stamp(p string) (storage.Version, bool) { return l.b.stamp(l.b.r, p) }

func (l linuxImpl) newStage(displace bool) stager {
	s := l.b.newStage()
	s.displace = displace
	return s
}

func (l linuxImpl) prepare(ctx context.Context, p string, data []byte) (preparedVersion, error) {
	return l.b.prepareVersion(ctx, p, data)
}

func (l linuxImpl) prepareFrom(ctx context.Context, p string, write func(io.Writer) error) (preparedVersion, error) {
	return l.b.prepareVersionFrom(ctx, p, write)
}

func (l linuxImpl) writable(p string, read bool, fn func(f rwFile, cur []byte) error) error {
	return l.b.writable(p, read, fn)
}

// walk lists dir (its handle opened, or -1 to open it here; walk closes
// it) and the folders below it in path order.
func (b *Backend) walk(ctx context.Context, r *os.Root, dir, prefix string, fn func(storage.ObjectInfo) error, opened int) error {
	keep, err := b.listSorted(r, dir, prefix, opened)
	if err != nil {
		return err
	}
	w := &walker{b: b, r: r, prefix: prefix, fn: fn, slots: make(chan struct{}, listAhead)}
	return w.emit(ctx, keep)
}

// listAhead is how many folders a walk lists ahead of the one it
// reports from: a folder's stats are system calls, and while the walk
// sorts and reports one folder (or waits on the kernel) the next ones
// are listed on the other cores.
const listAhead = 2

// walker is one walk: fn is called from the walk's goroutine only, in
// path order, while up to listAhead folders are listed ahead.
type walker struct {
	b      *Backend
	r      *os.Root
	prefix string
	fn     func(storage.ObjectInfo) error
	slots  chan struct{} // a folder listed ahead holds one
}

// emit reports the entries of one folder, sorted, and those of the
// folders below it.
func (w *walker) emit(ctx context.Context, keep []dirEntry) error {
	ahead := w.ahead(keep)
	defer ahead.wait() // nothing outlives the walk
	for i := range keep {
		e := &keep[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.dir {
			sub, err := ahead.take()
			if err != nil {
				return err
			}
			if err := w.emit(ctx, sub); err != nil {
				return err
			}
			continue
		}
		if err := w.fn(fingerprinted(e.key, e.st, e.fp)); err != nil {
			return err
		}
	}
	return nil
}

// listing is a folder's sorted entries, listed ahead.
type listing struct {
	entries []dirEntry
	err     error
}

// folders are the folders among a folder's entries, taken in order, each
// listed ahead while a slot is free or else when taken.
type folders struct {
	w       *walker
	dirs    []*dirEntry
	started []chan listing // per folder; nil until listed ahead
	taken   int            // dirs[:taken] are taken
	next    int            // dirs[next:] are not started
}

func (w *walker) ahead(keep []dirEntry) *folders {
	f := &folders{w: w}
	for i := range keep {
		if keep[i].dir {
			f.dirs = append(f.dirs, &keep[i])
		}
	}
	f.started = make([]chan listing, len(f.dirs))
	f.fill()
	return f
}

// fill starts listing the next folders while slots are free.
func (f *folders) fill() {
	for f.next < len(f.dirs) {
		select {
		case f.w.slots <- struct{}{}:
		default:
			return
		}
		c := make(chan listing, 1)
		f.started[f.next] = c
		dir := strings.TrimSuffix(f.dirs[f.next].key, "/")
		f.next++
		go func() {
			entries, err := f.w.b.listSorted(f.w.r, dir, f.w.prefix, -1)
			<-f.w.slots
			c <- listing{entries, err}
		}()
	}
}

// take returns the next folder's listing.
func (f *folders) take() ([]dirEntry, error) {
	i := f.taken
	f.taken++
	if c := f.started[i]; c != nil {
		f.started[i] = nil
		got := <-c
		f.fill()
		return got.entries, got.err
	}
	f.next = i + 1 // listed here, the ones after it meanwhile
	f.fill()
	return f.w.b.listSorted(f.w.r, strings.TrimSuffix(f.dirs[i].key, "/"), f.w.prefix, -1)
}

// wait waits for the folders listed ahead and not taken.
func (f *folders) wait() {
	for i, c := range f.started {
		if c != nil {
			<-c
			f.started[i] = nil
		}
	}
}

// listSorted lists dir (opened, or -1 to open it here; it is closed) as
// walk reports it: its entries in path order; none when it is missing or
// not a folder.
func (b *Backend) listSorted(r *os.Root, dir, prefix string, opened int) ([]dirEntry, error) {
	fd, closeDir, err := opened, func() { unix.Close(opened) }, error(nil)
	if opened < 0 {
		fd, closeDir, err = b.listedDir(r, dir)
	}
	if isMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", dir, b.root, err)
	}
	keep, err := b.listDir(fd, dir, prefix)
	closeDir()
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, nil // the prefix names a file's "folder"
	}
	if err != nil {
		return nil, err
	}

	// Sorting with folders as "name/" gives whole-path byte order.
	slices.SortFunc(keep, func(a, b dirEntry) int { return strings.Compare(a.key, b.key) })
	return keep, nil
}

// dirEntry is one entry of a listed folder: its path (with '/' appended
// for folders), its lstat and, for a file, its fingerprint, made where
// the folder is listed (ahead, on another core) rather than where it is
// reported.
type dirEntry struct {
	key string
	dir bool
	st  *unix.Stat_t // in a slice of the folder's: entries stay small to sort
	fp  string
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
		} else {
			e.fp = statFingerprint(e.st)
		}
		if listed(name, e.key, e.dir, prefix) {
			keep = append(keep, e)
		}
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

	// The stamp before the stat (stamp_linux.go); both of the opened file,
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
	cur, err := b.versionByContent(r, p)
	if err != nil {
		return false, err
	}
	return cur == want, nil
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
