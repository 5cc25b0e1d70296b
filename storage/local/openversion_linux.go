package local

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

// versionBeforeRead is the version of the opened file rc known before it
// is read, as readOpen gives it: a stamp, or a settled stat, of a file
// large enough for one; ok is false when only its content tells.
func (l linuxImpl) versionBeforeRead(rc io.ReadCloser, begin time.Time) (_ storage.Version, size int64, ok bool) {
	b := l.b
	fd, ok := fdOf(rc)
	if !ok {
		return "", 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < statVersionMin {
		return "", 0, false
	}
	// The stamp before the stat (stamp_linux.go).
	if v, ok := stampedVersion(fd); ok && unix.Fstat(fd, &st) == nil {
		return v, st.Size, true
	}
	limit := begin.Add(-b.settle)
	if time.Unix(st.Mtim.Unix()).Before(limit) && time.Unix(st.Ctim.Unix()).Before(limit) {
		return statVersionOf(&st), st.Size, true
	}
	return "", 0, false
}

func fdOf(rc io.ReadCloser) (int, bool) {
	switch f := rc.(type) {
	case *fdFile:
		fd := int(f.fd.Load())
		return fd, fd >= 0
	case sizedFile:
		return int(f.Fd()), true
	}
	return 0, false
}

// readerAt reads the opened file rc at offsets (pread), leaving its own
// offset alone.
func readerAt(rc io.ReadCloser) (io.ReaderAt, bool) {
	switch f := rc.(type) {
	case *fdFile:
		return preader{f}, true
	case sizedFile:
		return f.File, true
	case *os.File:
		return f, true
	}
	return nil, false
}

type preader struct{ f *fdFile }

func (p preader) ReadAt(b []byte, off int64) (int, error) {
	fd := int(p.f.fd.Load())
	if fd < 0 {
		return 0, os.ErrClosed
	}
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, p.f.pathErr("read", err)
		}
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}
