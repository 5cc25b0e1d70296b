package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/internal/ctxio"
	"github.com/distributor/distributor/storage"
)

type stage struct {
	b     *Backend
	mu    sync.Mutex
	dirs  map[string]int // folder → open handle; "." is the root's
	stale []int          // handles of folders found removed: closed by Close
	made  []string       // folders this stage created, parents first
	files map[string]*staged

	// displace: replacements swap the old file out and remove it in the
	// background (displace_linux.go); Close waits for the removals.
	displace  bool
	displaced displacer
	swap      int // swaps: 0 undecided, 1 yes, -1 no

	// unnamed: replacements are written unnamed too, and take a temp name
	// only when placed (nameTemp): a prepared catalog written before the
	// publication's intent leaves nothing if the process dies meanwhile.
	unnamed bool

	// direct: files are written past the page cache (copyDirect).
	direct bool
}

// staged is one written, not yet visible, object.
type staged struct {
	dir     string
	f       *fdFile // unnamed file, open until committed; nil for a temp name
	tmp     string  // temp name in dir
	cond    storage.PutOptions
	durable bool
	slot    bool // holds one of the backend's unnamed-file slots

	// info is the object's once named (its Put's: naming keeps the inode).
	info storage.ObjectInfo
}

func (b *Backend) newStage() *stage {
	return &stage{b: b, dirs: map[string]int{}, files: map[string]*staged{}}
}

// folder returns dir's handle, opening (and making) it on first use. p
// names the object for messages.
func (s *stage) folder(dir, p string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.folderLocked(dir, p)
}

func (s *stage) folderLocked(dir, p string) (int, error) {
	if fd, ok := s.dirs[dir]; ok {
		return fd, nil
	}
	if dir == "." {
		// The backend's own handle (never closed by the stage): a dup of
		// it cost three system calls per stage.
		s.dirs[dir] = s.b.rootFD
		return s.b.rootFD, nil
	}

	// One openat2 for an existing folder; a missing one is made (and a
	// link explained) component by component below.
	if fd, err := s.b.at(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
		s.dirs[dir] = fd
		return fd, nil
	}
	name := path.Base(dir)
	for attempt := 0; ; attempt++ {
		parent, err := s.folderLocked(path.Dir(dir), p)
		if err != nil {
			return -1, err
		}
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			s.dirs[dir] = fd
			return fd, nil
		}
		if errors.Is(err, unix.ENOENT) && attempt < 5 {
			switch err := unix.Mkdirat(parent, name, 0o755); {
			case err == nil:
				s.made = append(s.made, dir)
				s.b.fresh.Store(dir, struct{}{})
			case errors.Is(err, unix.EEXIST):
			case errors.Is(err, unix.ENOENT):
				// The parent was removed since it was opened (a Delete
				// emptied it): open it again.
				s.forgetLocked(path.Dir(dir))
			default:
				return -1, &fs.PathError{Op: "mkdir", Path: dir, Err: err}
			}
			continue
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			var st unix.Stat_t
			if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, fmt.Errorf("local root %s: %q: %w %q; symlinks are refused so that nothing outside the root is touched",
					s.b.root, p, storage.ErrSymlink, dir)
			}
		}
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
}

// forgetLocked drops the handles of dir and the folders below it (found
// removed). Other writers may still be using them, so they are closed only
// with the stage: a closed number could be reused for another file.
func (s *stage) forgetLocked(dir string) {
	for d, fd := range s.dirs {
		if d == dir || strings.HasPrefix(d, dir+"/") || dir == "." {
			if fd != s.b.rootFD {
				s.stale = append(s.stale, fd)
			}
			delete(s.dirs, d)
		}
	}
}

func (s *stage) forget(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(dir)
}

// Put writes src as the future object p (see Backend.Put for the options).
func (s *stage) Put(ctx context.Context, p string, src storage.Source, size int64, opts storage.PutOptions) (_ storage.ObjectInfo, err error) {
	defer s.b.classifyTo(&err)
	return s.b.putSource(ctx, s, p, src, size, opts)
}

// put is Put. Bad paths and symlinks fail as such; I/O errors are wrapped
// as "put p in root".
func (s *stage) put(ctx context.Context, p string, src io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if err := catalog.ValidatePath(p); err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("local root %s: %w", s.b.root, err)
	}
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	s.mu.Lock()
	_, dup := s.files[p]
	s.mu.Unlock()
	if dup {
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: already staged", p, s.b.root)
	}
	dir, base := path.Dir(p), path.Base(p)
	d, err := s.folder(dir, p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if !opts.IfAbsent {
		// A replacement never goes through a link at p, even one that
		// rename(2) would merely replace.
		var st unix.Stat_t
		err := unix.Fstatat(d, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return storage.ObjectInfo{}, fmt.Errorf("local root %s: %q: %w %q; symlinks are refused so that nothing outside the root is touched",
				s.b.root, p, storage.ErrSymlink, p)
		}
	}
	st := &staged{dir: dir, cond: opts, durable: !opts.DeferSync}
	oi, err := s.write(ctx, st, d, src, size)
	oi.Path = p
	if err != nil {
		st.discard(s)
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: %w", p, s.b.root, err)
	}
	st.info = oi
	s.mu.Lock()
	_, dup = s.files[p]
	if !dup {
		s.files[p] = st
	}
	s.mu.Unlock()
	if dup { // a concurrent Put of the same path won
		st.discard(s)
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: already staged", p, s.b.root)
	}
	return oi, nil
}

// write creates st's file in its folder d and copies src into it; the
// info is the file's, taken before it is visible.
func (s *stage) write(ctx context.Context, st *staged, d int, src io.Reader, size int64) (storage.ObjectInfo, error) {
	f, err := s.create(st, d)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	var n int64
	if s.direct {
		n, err = s.b.copyDirect(ctx, f, src)
	} else {
		n, err = s.b.copy(ctx, f, src, size, !st.durable)
	}
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("the source gave %d bytes, expected %d", n, size)
	}
	if err == nil && st.durable {
		err = f.Sync()
		s.b.synced("file", st.dir)
	}
	var fst unix.Stat_t
	if err == nil {
		// Whatever replaces p later has another inode.
		err = f.stat(&fst)
	}
	if st.f == nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return statInfo("", &fst), err
}

// create opens st's file in its folder d: an unnamed one (kept in st.f)
// when it can, else under a temp name (kept in st.tmp).
func (s *stage) create(st *staged, d int) (*fdFile, error) {
	if (st.cond.IfAbsent || s.unnamed) && !s.b.noTmpfile.Load() && s.b.takeSlot() {
		st.slot = true
		for attempt := 0; ; attempt++ {
			fd, err := unix.Openat(d, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if errors.Is(err, unix.ENOENT) && attempt < 5 {
				// The folder was removed since it was opened.
				s.forget(st.dir)
				if d, err = s.folder(st.dir, st.dir); err != nil {
					return nil, err
				}
				continue
			}
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
				s.b.noTmpfile.Store(true) // this filesystem has none: temp names from now on
				s.b.releaseSlot()
				st.slot = false
				break
			}
			if err != nil {
				return nil, &fs.PathError{Op: "create an unnamed file in", Path: st.dir, Err: err}
			}
			st.f = newFdFile(fd, path.Join(s.b.root, st.dir, "(unnamed)"))
			return st.f, nil
		}
	}

	// The temp file keeps its folder from being removed as empty, so
	// the rename (or link) beside it cannot miss its folder.
	name := catalog.TempPrefix + rand.Text()
	fd, err := unix.Openat(d, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: path.Join(st.dir, name), Err: err}
	}
	st.tmp = name
	return newFdFile(fd, path.Join(s.b.root, st.dir, name)), nil
}

// copy streams src (size bytes, -1 if unknown) into f. deferred: the
// caller syncs later (DeferSync); large objects start their writeback as
// they are written (see writeback), in chunks of writebackChunk, or of
// durableChunk for an object flushed right after (a catalog).
func (b *Backend) copy(ctx context.Context, f *fdFile, src io.Reader, size int64, deferred bool) (int64, error) {
	pool := &b.bufs
	if size >= 0 && size < smallBuf {
		pool = &b.smallBufs
	}
	buf := pool.Get().(*[]byte)
	defer pool.Put(buf)
	var w io.Writer = f
	chunk := int64(writebackChunk)
	if !deferred {
		chunk = durableChunk
	}
	if size < 0 || size >= chunk {
		w = &writeback{f: f, chunk: chunk}
	}

	// struct{io.Writer} hides ReadFrom so that the buffer is used.
	return io.CopyBuffer(struct{ io.Writer }{w}, ctxio.Reader(ctx, src), *buf)
}

// writebackChunk is how many written bytes of a large object are handed to
// the disk at a time; durableChunk the same for an object fsynced as soon
// as it is written (a 5 MB catalog): its fsync then waits for the last
// chunk, not all of it.
const (
	writebackChunk = 8 << 20
	durableChunk   = 1 << 20
)

// writeback writes to f and, every writebackChunk bytes, starts writing
// them to the disk (sync_file_range SYNC_FILE_RANGE_WRITE: it does not
// wait for them). The publication's one barrier (syncfs) then finds most
// of a large object's bytes on the disk already instead of flushing all
// of them at the end, and the flush overlaps the hashing and copying of
// the rest. Durability still comes from the barrier alone.
type writeback struct {
	f          *fdFile
	chunk      int64 // bytes handed to the disk at a time
	off, flush int64 // bytes written; bytes handed to the disk
}

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if err == nil && w.off-w.flush >= w.chunk {
		// Advice only: a failure changes nothing the barrier relies on.
		_ = unix.SyncFileRange(int(w.f.fd.Load()), w.flush, w.off-w.flush, unix.SYNC_FILE_RANGE_WRITE)
		w.flush = w.off
	}
	return n, err
}

// Commit makes the object staged at p visible under its Put's condition:
// IfAbsent links it (link never replaces: ErrConflict when anything is at
// p); IfMatch compares p's fingerprint right before the rename (see
// Backend.Put).
func (s *stage) Commit(ctx context.Context, p string) (storage.ObjectInfo, error) {
	s.mu.Lock()
	st := s.files[p]
	s.mu.Unlock()
	if err := s.commit(ctx, p); err != nil {
		return storage.ObjectInfo{}, err
	}
	s.b.dirty.mark() // its name is durable after the next Sync
	return st.info, nil
}

// commit is Commit without the info.
func (s *stage) commit(ctx context.Context, p string) (err error) {
	defer s.b.classifyTo(&err)
	s.mu.Lock()
	st := s.files[p]
	delete(s.files, p)
	s.mu.Unlock()
	if st == nil {
		return fmt.Errorf("commit %q in %s: nothing staged there", p, s.b.root)
	}
	defer st.discard(s)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.name(st, p); err != nil {
		return fmt.Errorf("put %q in %s: %w", p, s.b.root, err)
	}
	if st.durable {
		d, err := s.folder(st.dir, p)
		if err != nil {
			return err
		}
		if err := unix.Fsync(d); err != nil {
			return fmt.Errorf("put %q in %s: sync folder %q: %w", p, s.b.root, st.dir, err)
		}
		s.b.synced("folder", st.dir)
		return s.syncFreshParents(st.dir, p)
	}
	return nil
}

// name gives st's file the name p.
func (s *stage) name(st *staged, p string) error {
	if st.f != nil && !st.cond.IfAbsent {
		// An unnamed replacement: a rename needs a name to move.
		if err := s.nameTemp(st); err != nil {
			return err
		}
	}
	base := path.Base(p)
	var (
		d   int
		err error
	)
	for attempt := 0; ; attempt++ {
		if d, err = s.folder(st.dir, p); err != nil {
			return err
		}
		switch {
		case st.f != nil:
			err = s.b.link(int(st.f.fd.Load()), d, base)
			if errors.Is(err, unix.ENOENT) && attempt < 5 {
				s.forget(st.dir) // a Delete removed the emptied folder: make it again
				continue
			}
		case st.cond.IfAbsent:
			if err = unix.Linkat(d, st.tmp, d, base, 0); err == nil {
				_ = unix.Unlinkat(d, st.tmp, 0) // p holds the bytes now; a leftover temp name is never listed
				st.tmp = ""
			}
		default:
			if st.cond.IfMatch != "" {
				var fi unix.Stat_t
				switch err := unix.Fstatat(d, base, &fi, unix.AT_SYMLINK_NOFOLLOW); {
				case errors.Is(err, unix.ENOENT):
					return fmt.Errorf("%q is gone: %w", p, storage.ErrConflict)
				case err != nil:
					return &fs.PathError{Op: "stat", Path: p, Err: err}
				case statFingerprint(&fi) != st.cond.IfMatch:
					return fmt.Errorf("%q was replaced: %w", p, storage.ErrConflict)
				}
			}
			if err = s.replace(d, st.tmp, base); err == nil {
				st.tmp = ""
			}
		}
		break
	}
	var fi unix.Stat_t
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST) && unix.Fstatat(d, base, &fi, unix.AT_SYMLINK_NOFOLLOW) == nil && fi.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("local root %s: %q: %w %q; symlinks are refused so that nothing outside the root is touched",
			s.b.root, p, storage.ErrSymlink, p)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%q exists: %w", p, storage.ErrConflict)
	default:
		return &fs.PathError{Op: "name the written file", Path: p, Err: err}
	}
}

// nameTemp gives st's unnamed file a temp name in its folder.
func (s *stage) nameTemp(st *staged) error {
	d, err := s.folder(st.dir, st.dir)
	if err != nil {
		return err
	}
	name := catalog.TempPrefix + rand.Text()
	if err := s.b.link(int(st.f.fd.Load()), d, name); err != nil {
		return &fs.PathError{Op: "name the unnamed file", Path: path.Join(st.dir, name), Err: err}
	}
	st.tmp = name
	st.f.Close()
	st.f = nil
	if st.slot {
		s.b.releaseSlot()
		st.slot = false
	}
	return nil
}

// discard drops st's file: an unnamed one vanishes when closed, a temp
// name is removed.
func (st *staged) discard(s *stage) {
	if st.f != nil {
		st.f.Close()
		st.f = nil
	}
	if st.slot {
		s.b.releaseSlot()
		st.slot = false
	}
	if st.tmp != "" {
		if d, err := s.folder(st.dir, st.dir); err == nil {
			_ = unix.Unlinkat(d, st.tmp, 0)
		}
		st.tmp = ""
	}
}

// Close discards what was staged and not committed, removes the folders
// the stage made that stayed empty, and closes the folder handles.
func (s *stage) Close() error {
	s.displaced.wait() // before the folder handles it uses are closed
	s.mu.Lock()
	files := s.files
	s.files = map[string]*staged{}
	s.mu.Unlock()
	for _, st := range files {
		st.discard(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	// Deepest first; a folder that holds anything stays (rmdir refuses).
	for i := len(s.made) - 1; i >= 0; i-- {
		dir := s.made[i]
		if parent, ok := s.dirs[path.Dir(dir)]; ok {
			if unix.Unlinkat(parent, path.Base(dir), unix.AT_REMOVEDIR) == nil {
				s.b.fresh.Delete(dir)
			}
		}
	}
	s.made = nil
	for _, fd := range s.dirs {
		if fd != s.b.rootFD {
			unix.Close(fd)
		}
	}
	for _, fd := range s.stale {
		unix.Close(fd)
	}
	s.dirs, s.stale = map[string]int{}, nil
	return nil
}

// statFingerprint is fingerprint for a stat(2) result.
func statFingerprint(st *unix.Stat_t) string {
	// One allocation: a listing makes one per file (three numbers
	// formatted apart and joined made four).
	var buf [64]byte
	b := strconv.AppendUint(buf[:0], st.Ino, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 10)
	return string(b)
}

// takeSlot reserves one open unnamed file; false when the stage's share
// of the process's open files is used up (the write takes a temp name).
func (b *Backend) takeSlot() bool {
	if b.unnamed.Add(1) > b.maxUnnamed {
		b.unnamed.Add(-1)
		return false
	}
	return true
}

func (b *Backend) releaseSlot() { b.unnamed.Add(-1) }

// link names the unnamed file fd as name in folder d. linkat(2) with
// AT_EMPTY_PATH links the descriptor itself (allowed since Linux 6.10 to
// the process that opened it); elsewhere it goes through the /proc link,
// a path walk more per file.
func (b *Backend) link(fd, d int, name string) error {
	if b.noEmptyLink.Load() {
		return linkProc(fd, d, name)
	}
	err := unix.Linkat(fd, "", d, name, unix.AT_EMPTY_PATH)
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
		return err
	}

	// An older kernel refuses with ENOENT (or EPERM); ENOENT is also a
	// folder removed meanwhile. The /proc link tells them apart.
	perr := linkProc(fd, d, name)
	if perr == nil {
		b.noEmptyLink.Store(true)
	}
	return perr
}

func linkProc(fd, d int, name string) error {
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), d, name, unix.AT_SYMLINK_FOLLOW)
}
