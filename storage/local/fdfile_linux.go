package local

import (
	"errors"
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

// fdFile is a regular file used through its descriptor. Per file, an
// os.File costs a system call (NewFile asks whether the descriptor is
// non-blocking) that a first publication of many small files pays twice
// (bundle file and output); the runtime gains nothing from it here, as
// regular files are never polled.
type fdFile struct {
	fd   atomic.Int64 // -1 once closed
	name string       // for messages

	// left is what a reader expects still to read (the size fstat gave
	// when opened, less what was read), or -1 when unknown: a read that
	// reaches it reports io.EOF at once instead of one more read(2) to
	// find it. Bytes appended after the fstat are not read; a file that
	// was larger already reads to its real end.
	left int64
	size int64 // the size fstat gave when opened, or -1
}

func newFdFile(fd int, name string) *fdFile {
	f := &fdFile{name: name, left: -1, size: -1}
	f.fd.Store(int64(fd))
	return f
}

// Size is the file's size when it was opened (storage.Reader.Size).
func (f *fdFile) Size() int64 { return f.size }

func (f *fdFile) pathErr(op string, err error) error {
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

func (f *fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	fd := int(f.fd.Load())
	if fd < 0 {
		return 0, f.pathErr("read", fs.ErrClosed)
	}
	if f.left == 0 {
		return 0, io.EOF
	}
	retried := false
	for {
		n, err := unix.Read(fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN) && !retried:
			// Opened O_NONBLOCK (readBeneath), which regular files
			// ignore; should one not, block like any other read (F_SETFL
			// 0: it was opened with no other status flag).
			retried = true
			if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); ferr != nil {
				return 0, f.pathErr("read", ferr)
			}
			continue
		case err != nil:
			return 0, f.pathErr("read", err)
		case n == 0:
			return 0, io.EOF
		}
		if f.left > 0 {
			if f.left = max(0, f.left-int64(n)); f.left == 0 {
				return n, io.EOF
			}
		}
		return n, nil
	}
}

func (f *fdFile) Write(p []byte) (int, error) {
	fd := int(f.fd.Load())
	if fd < 0 {
		return 0, f.pathErr("write", fs.ErrClosed)
	}
	done := 0
	for done < len(p) {
		n, err := unix.Write(fd, p[done:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, f.pathErr("write", err)
		}
		if n == 0 {
			return done, f.pathErr("write", io.ErrShortWrite)
		}
		done += n
	}
	return done, nil
}

func (f *fdFile) Sync() error {
	for {
		err := unix.Fsync(int(f.fd.Load()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return f.pathErr("sync", err)
		}
		return nil
	}
}

func (f *fdFile) stat(st *unix.Stat_t) error {
	if err := unix.Fstat(int(f.fd.Load()), st); err != nil {
		return f.pathErr("stat", err)
	}
	return nil
}

// Close closes the descriptor once; later calls do nothing.
func (f *fdFile) Close() error {
	fd := int(f.fd.Swap(-1))
	if fd < 0 {
		return nil
	}
	if err := unix.Close(fd); err != nil {
		return f.pathErr("close", err)
	}
	return nil
}

// statInfo is the object info of the file st describes, stored at p.
func statInfo(p string, st *unix.Stat_t) storage.ObjectInfo {
	return fingerprinted(p, st, statFingerprint(st))
}

// fingerprinted is statInfo with st's fingerprint made beforehand.
func fingerprinted(p string, st *unix.Stat_t, fp string) storage.ObjectInfo {
	return storage.ObjectInfo{Path: p, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix()), Fingerprint: fp,
		Symlink: st.Mode&unix.S_IFMT == unix.S_IFLNK}
}
