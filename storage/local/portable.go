package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/internal/ctxio"
	"github.com/distributor/distributor/storage"
)

// portableImpl is the implementation every system has (impl), and the
// reference: the plainest way to what the Linux one does, held to the same
// tests (eachImpl, the contract suites). Every path goes through the
// root's os.Root after checkPath refused links on it; a write is a temp
// file beside its path, fsynced, then linked into place (IfAbsent: a link
// never replaces anything) or renamed over the old file, and its folder
// is fsynced (folderSync). Every write is durable when it returns, so
// DeferSync defers nothing and Sync is left with the folders made without
// a durable write below them. Versions are the content's digest.
//
// A link swapped onto a checked path before the operation reaches it is
// followed, but only inside the root: os.Root refuses to leave it.
type portableImpl struct{ b *Backend }

func (s portableImpl) stat(p string) (storage.ObjectInfo, error) {
	b := s.b
	r, err := b.open(p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	fi, err := b.regular(r, p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return b.info(p, p, fi), nil
}

func (s portableImpl) open(p string) (io.ReadCloser, error) {
	b := s.b
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

func (s portableImpl) readVersion(p string) ([]byte, storage.Version, error) {
	r, err := s.b.open(p)
	if err != nil {
		return nil, "", err
	}
	return s.b.readVersionByContent(r, p)
}

func (s portableImpl) list(ctx context.Context, dir, prefix string, fn func(storage.ObjectInfo) error) error {
	if dir != "." {
		if err := s.b.checkPath(s.b.r, dir); err != nil {
			return err
		}
	}
	return s.walk(ctx, dir, prefix, fn)
}

// walk lists the folder dir and the folders below it in path order, each
// entry lstat'ed (links are listed, never followed).
func (s portableImpl) walk(ctx context.Context, dir, prefix string, fn func(storage.ObjectInfo) error) error {
	b := s.b
	b.tookGeneral("list " + dir)
	if fi, err := b.r.Lstat(dir); isMissing(err) || err == nil && !fi.IsDir() {
		return nil // gone, or the prefix names a file's "folder"
	}
	d, err := b.r.Open(dir)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %q in %s: %w", dir, b.root, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %q in %s: %w", dir, b.root, err)
	}
	type entry struct {
		key string // the path, with '/' appended for a folder
		fi  fs.FileInfo
	}
	keep := make([]entry, 0, len(names))
	for _, name := range names {
		key := name
		if dir != "." {
			key = dir + "/" + name
		}
		fi, err := b.r.Lstat(key)
		if isMissing(err) {
			continue // deleted while listing
		}
		if err != nil {
			return fmt.Errorf("list %q in %s: %w", key, b.root, err)
		}
		if fi.IsDir() {
			key += "/"
		}
		if listed(name, key, fi.IsDir(), prefix) {
			keep = append(keep, entry{key, fi})
		}
	}

	// Sorting with folders as "name/" gives whole-path byte order.
	slices.SortFunc(keep, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range keep {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.fi.IsDir() {
			if err := s.walk(ctx, strings.TrimSuffix(e.key, "/"), prefix, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(b.info(e.key, e.key, e.fi)); err != nil {
			return err
		}
	}
	return nil
}

func (s portableImpl) remove(p, _ string) (string, error) { return s.b.removeGeneral(p) }

// syncDir opens the folder dir through the root and flushes it
// (folderSync).
func (s portableImpl) syncDir(dir string) error {
	b := s.b
	b.tookGeneral("sync folder " + dir)
	d, err := b.r.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := folderSync(d); err != nil {
		return fmt.Errorf("sync folder %q: %w", dir, err)
	}
	b.synced("folder", dir)
	return nil
}

// sync flushes the entries of the folders made since without a durable
// write below them (the lock's): every write made itself durable.
func (s portableImpl) sync(ctx context.Context) error {
	b := s.b
	for _, dir := range b.freshFolders() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.syncDir(path.Dir(dir)); err != nil && !isMissing(err) {
			return fmt.Errorf("sync %s: %w", b.root, err)
		}
		b.fresh.Delete(dir)
	}
	return nil
}

// lockAt checks p (a refused write then leaves no lock file behind), takes
// the lock and checks p's version under it, the path once more included.
func (s portableImpl) lockAt(ctx context.Context, verb, p string, want storage.Version) (func(), error) {
	b := s.b
	if _, err := b.open(p); err != nil {
		return nil, err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	same, err := s.currentIs(p, want)
	if err != nil || !same {
		unlock()
		if err == nil {
			err = fmt.Errorf("%s %q in %s: %w", verb, p, b.root, storage.ErrConflict)
		}
		return nil, err
	}
	return unlock, nil
}

// currentIs reports whether p's current version is want ("": nothing
// there), by its content.
func (s portableImpl) currentIs(p string, want storage.Version) (bool, error) {
	b := s.b
	r, err := b.open(p)
	if err != nil {
		return false, err
	}
	if want == "" {
		_, err := b.regular(r, p)
		if errors.Is(err, storage.ErrNotExist) {
			return true, nil
		}
		return false, err
	}
	cur, err := b.versionByContent(r, p)
	return err == nil && cur == want, err
}

// lock takes the root's compare-and-swap lock: an exclusive lock of the
// lock file's own open file (tryLockFile), which excludes other goroutines
// as well as other processes; polled so that ctx can end the wait.
// Closing the file releases it.
func (s portableImpl) lock(ctx context.Context) (unlock func(), err error) {
	b := s.b
	if err := s.mkdir(catalog.ReservedDir); err != nil {
		return nil, fmt.Errorf("lock in %s: %w", b.root, err)
	}
	f, err := b.r.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock in %s: %w", b.root, err)
	}
	wait := time.Millisecond
	for {
		ok, err := tryLockFile(f)
		if ok {
			return func() { unlockFile(f); f.Close() }, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s in %s: %w", lockName, b.root, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s in %s: %w", lockName, b.root, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// mkdir makes the folder dir, whose parent exists, noting it as fresh.
func (s portableImpl) mkdir(dir string) error {
	switch err := s.b.r.Mkdir(dir, 0o755); {
	case err == nil:
		s.b.fresh.Store(dir, struct{}{})
		return nil
	case errors.Is(err, fs.ErrExist):
		return nil
	default:
		return err
	}
}

// stamp is never possible here: versions are the content's.
func (portableImpl) stamp(string) (storage.Version, bool) { return "", false }

// newStage begins a portable stage; a replacement renames over the old
// file, so there is nothing to displace.
func (s portableImpl) newStage(bool) stager {
	return &portableStage{b: s.b, files: map[string]*portableStaged{}}
}

func (s portableImpl) prepare(ctx context.Context, p string, data []byte) (preparedVersion, error) {
	st := &portableStage{b: s.b, files: map[string]*portableStaged{}}
	if _, err := st.put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		st.Close()
		return nil, err
	}
	return &portablePrepared{b: s.b, s: st, p: p, data: data}, nil
}

func (s portableImpl) prepareFrom(ctx context.Context, p string, write func(io.Writer) error) (preparedVersion, error) {
	st := &portableStage{b: s.b, files: map[string]*portableStaged{}}
	if err := piped(write, func(src io.Reader) error {
		_, err := st.put(ctx, p, src, -1, storage.PutOptions{})
		return err
	}); err != nil {
		st.Close()
		return nil, fmt.Errorf("write %q in %s: %w", p, s.b.root, err)
	}
	return &portablePrepared{b: s.b, s: st, p: p, streamed: true}, nil
}

// writable opens p through the root after checking it (a regular file,
// reached through no link). A change made through it is flushed before
// writable returns, whether fn flushed or not: Sync has no file to flush
// later here.
func (s portableImpl) writable(p string, read bool, fn func(f rwFile, cur []byte) error) error {
	r, err := s.b.open(p)
	if err != nil {
		return err
	}
	fi, err := r.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%q is not a regular file", p)
	}
	flag := os.O_WRONLY
	if read {
		flag = os.O_RDWR
	}
	f, err := r.OpenFile(p, flag, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var cur []byte
	if read {
		if cur, err = io.ReadAll(f); err != nil {
			return err
		}
	}
	w := &osRW{File: f}
	if err := fn(w, cur); err != nil {
		return err
	}
	if !w.dirty {
		return nil
	}
	if err := w.Datasync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	s.b.synced("file", path.Dir(p))
	return nil
}

// osRW is an os.File opened for an in-place write (rwFile); dirty is set
// by a change not flushed yet.
type osRW struct {
	*os.File
	dirty bool
}

func (f *osRW) WriteAt(p []byte, off int64) (int, error) {
	f.dirty = true
	return f.File.WriteAt(p, off)
}

func (f *osRW) Truncate(size int64) error {
	f.dirty = true
	return f.File.Truncate(size)
}

// Datasync flushes the file (fsync: os has no fdatasync).
func (f *osRW) Datasync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.dirty = false
	return nil
}

// portableStage is a stage of the portable implementation: each object is
// written under a temp name beside its path (List skips it) and fsynced;
// Commit links it into place (IfAbsent) or renames it over the old file,
// and flushes the folder.
type portableStage struct {
	b     *Backend
	mu    sync.Mutex
	files map[string]*portableStaged
	made  []string // folders this stage created, parents first
}

// portableStaged is one written, not yet visible, object: tmp is its
// temp file's path ("" once named or removed).
type portableStaged struct {
	dir, tmp string
	cond     storage.PutOptions
}

// Put writes src as the future object p (see Backend.Put for the options).
func (s *portableStage) Put(ctx context.Context, p string, src storage.Source, size int64, opts storage.PutOptions) (_ storage.ObjectInfo, err error) {
	defer s.b.classifyTo(&err)
	return s.b.putSource(ctx, s, p, src, size, opts)
}

func (s *portableStage) put(ctx context.Context, p string, src io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	b := s.b
	if err := catalog.ValidatePath(p); err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("local root %s: %w", b.root, err)
	}
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	s.mu.Lock()
	_, dup := s.files[p]
	s.mu.Unlock()
	if dup {
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: already staged", p, b.root)
	}

	// A link anywhere on the path, p itself included, is refused: nothing
	// is written through one, nor named onto one.
	if err := b.checkPath(b.r, p); err != nil {
		return storage.ObjectInfo{}, err
	}
	st := &portableStaged{dir: path.Dir(p), cond: opts}
	oi, err := s.write(ctx, st, src, size)
	oi.Path = p
	if err != nil {
		s.discard(st)
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: %w", p, b.root, err)
	}
	s.mu.Lock()
	_, dup = s.files[p]
	if !dup {
		s.files[p] = st
	}
	s.mu.Unlock()
	if dup { // a concurrent Put of the same path won
		s.discard(st)
		return storage.ObjectInfo{}, fmt.Errorf("put %q in %s: already staged", p, b.root)
	}
	return oi, nil
}

// write creates st's temp file in its folder (made first if missing),
// copies src into it and flushes it; the info is the file's.
func (s *portableStage) write(ctx context.Context, st *portableStaged, src io.Reader, size int64) (storage.ObjectInfo, error) {
	b := s.b
	name := path.Join(st.dir, catalog.TempPrefix+rand.Text())
	var f *os.File
	for attempt := 0; ; attempt++ {
		if err := s.mkdirs(st.dir); err != nil {
			return storage.ObjectInfo{}, err
		}
		var err error
		f, err = b.r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if isMissing(err) && attempt < 5 {
			continue // the folder was emptied and removed meanwhile (a Delete, a stage's Close)
		}
		if err != nil {
			return storage.ObjectInfo{}, err
		}
		break
	}
	st.tmp = name
	n, err := b.copyTo(ctx, f, src, size)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("the source gave %d bytes, expected %d", n, size)
	}
	if err == nil {
		// Durable before it is named: no Sync flushes it later.
		err = f.Sync()
		b.synced("file", st.dir)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return storage.ObjectInfo{}, err
	}

	// Taken once closed: a rename or link keeps the file's id and times.
	fi, err := b.r.Lstat(name)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return b.info("", name, fi), nil
}

// mkdirs makes dir and its missing parents, noting each folder made (for
// Close, and as fresh).
func (s *portableStage) mkdirs(dir string) error {
	if dir == "." {
		return nil
	}
	fi, err := s.b.r.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case !isMissing(err):
		return err
	}
	if err := s.mkdirs(path.Dir(dir)); err != nil {
		return err
	}
	switch err := s.b.r.Mkdir(dir, 0o755); {
	case err == nil:
		s.mu.Lock()
		s.made = append(s.made, dir)
		s.mu.Unlock()
		s.b.fresh.Store(dir, struct{}{})
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	return nil
}

// copyTo streams src (size bytes, -1 if unknown) into w through a pooled
// buffer sized to the object.
func (b *Backend) copyTo(ctx context.Context, w io.Writer, src io.Reader, size int64) (int64, error) {
	pool := &b.bufs
	if size >= 0 && size < smallBuf {
		pool = &b.smallBufs
	}
	buf := pool.Get().(*[]byte)
	defer pool.Put(buf)

	// struct{io.Writer} hides ReadFrom so that the buffer is used.
	return io.CopyBuffer(struct{ io.Writer }{w}, ctxio.Reader(ctx, src), *buf)
}

// Commit makes the object staged at p visible under its Put's condition
// (see Backend.Put), durably: its folder is flushed, and the parents of
// the folders made for it.
func (s *portableStage) Commit(ctx context.Context, p string) (storage.ObjectInfo, error) {
	if err := s.commit(ctx, p); err != nil {
		return storage.ObjectInfo{}, err
	}

	// Named by a rename: the info is read from the named object.
	return s.b.Stat(ctx, p)
}

// commit is Commit without the info.
func (s *portableStage) commit(ctx context.Context, p string) (err error) {
	b := s.b
	defer b.classifyTo(&err)
	s.mu.Lock()
	st := s.files[p]
	delete(s.files, p)
	s.mu.Unlock()
	if st == nil {
		return fmt.Errorf("commit %q in %s: nothing staged there", p, b.root)
	}
	defer s.discard(st)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.name(st, p); err != nil {
		return fmt.Errorf("put %q in %s: %w", p, b.root, err)
	}
	if err := (portableImpl{b}).syncDir(st.dir); err != nil {
		return fmt.Errorf("put %q in %s: %w", p, b.root, err)
	}
	for dir := st.dir; dir != "."; dir = path.Dir(dir) {
		if _, ok := b.fresh.Load(dir); !ok {
			continue
		}
		if err := (portableImpl{b}).syncDir(path.Dir(dir)); err != nil {
			return fmt.Errorf("put %q in %s: %w", p, b.root, err)
		}
		b.fresh.Delete(dir)
	}
	return nil
}

// name gives st's temp file the name p: a link where nothing may be
// (IfAbsent), else a rename after the IfMatch check.
func (s *portableStage) name(st *portableStaged, p string) error {
	r := s.b.r
	if st.cond.IfAbsent {
		if err := r.Link(st.tmp, p); err != nil {
			return s.named(p, err)
		}

		// p holds the bytes now; a temp name left behind is never listed.
		_ = r.Remove(st.tmp)
		st.tmp = ""
		return nil
	}
	if st.cond.IfMatch != "" {
		fi, err := r.Lstat(p)
		switch {
		case isMissing(err):
			return fmt.Errorf("%q is gone: %w", p, storage.ErrConflict)
		case err != nil:
			return err
		case fingerprint(r, p, fi) != st.cond.IfMatch:
			return fmt.Errorf("%q was replaced: %w", p, storage.ErrConflict)
		}
	}
	if err := r.Rename(st.tmp, p); err != nil {
		return s.named(p, err)
	}
	st.tmp = ""
	return nil
}

// named is the error of a link or rename to p that failed with err.
func (s *portableStage) named(p string, err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	if !errors.Is(err, fs.ErrExist) {
		return &fs.PathError{Op: "name the written file", Path: p, Err: err}
	}
	if fi, lerr := s.b.r.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("local root %s: %q: %w %q; symlinks are refused so that nothing outside the root is touched",
			s.b.root, p, storage.ErrSymlink, p)
	}
	return fmt.Errorf("%q exists: %w", p, storage.ErrConflict)
}

// discard removes st's temp file, if it still has one.
func (s *portableStage) discard(st *portableStaged) {
	if st.tmp != "" {
		_ = s.b.r.Remove(st.tmp)
		st.tmp = ""
	}
}

// Close discards what was staged and not committed and removes the
// folders the stage made that stayed empty.
func (s *portableStage) Close() error {
	s.mu.Lock()
	files, made := s.files, s.made
	s.files, s.made = map[string]*portableStaged{}, nil
	s.mu.Unlock()
	for _, st := range files {
		s.discard(st)
	}

	// Deepest first; a folder that holds anything stays (removing it fails).
	for i := len(made) - 1; i >= 0; i-- {
		if s.b.r.Remove(made[i]) == nil {
			s.b.fresh.Delete(made[i])
		}
	}
	return nil
}

// portablePrepared is bytes prepared by the portable implementation:
// written and flushed under a temp name, renamed into place by
// CommitIfVersion under the lock.
type portablePrepared struct {
	b    *Backend
	s    *portableStage
	p    string
	data []byte

	// streamed: written by prepareStream (data is nil).
	streamed bool
}

// Place does nothing: the bytes have their temp name and are flushed
// already.
func (pv *portablePrepared) Place() error { return nil }

// CommitIfVersion renames the prepared bytes over p if p is at version
// want (ErrConflict otherwise), under the root's compare-and-swap lock,
// and flushes the folder: durable on return.
func (pv *portablePrepared) CommitIfVersion(ctx context.Context, want storage.Version) (_ storage.Version, err error) {
	b := pv.b
	defer b.classifyTo(&err)
	unlock, err := portableImpl{b}.lockAt(ctx, "write", pv.p, want)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := pv.s.commit(ctx, pv.p); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", pv.p, b.root, err)
	}
	if pv.streamed {
		v, err := b.versionByContent(b.r, pv.p)
		return v, err
	}
	return Version(pv.data), nil
}

// Close drops the bytes unless they were committed.
func (pv *portablePrepared) Close() error { return pv.s.Close() }
