package local

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// writable runs fn on p opened for writing (for reading too, with its
// current bytes, when read is set): a regular file below the root, never
// reached through a link. One openat2 where the kernel has it (no walk,
// no poller set-up: this runs twice per publication); the general path
// otherwise, which also explains a refusal.
func (b *Backend) writable(p string, read bool, fn func(f rwFile, cur []byte) error) error {
	if read {
		return b.checkedWritable(p, func(fd int, cur []byte) error { return fn(fdRW(fd), cur) })
	}
	return b.writableAs(p, unix.O_WRONLY, func(fd int, _ *unix.Stat_t) error { return fn(fdRW(fd), nil) })
}

// checkedWritable runs fn on p opened for reading and writing (as
// writable), with its current bytes.
func (b *Backend) checkedWritable(p string, fn func(fd int, cur []byte) error) error {
	return b.writableAs(p, unix.O_RDWR, func(fd int, st *unix.Stat_t) error {
		cur := make([]byte, 0, st.Size+1)
		for {
			n, err := unix.Pread(fd, cur[len(cur):cap(cur)], int64(len(cur)))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return err
			}
			cur = cur[:len(cur)+n]
			if n == 0 || len(cur) < cap(cur) && int64(len(cur)) == st.Size {
				break // the end (a short read at the size fstat gave is the end)
			}
			if len(cur) == cap(cur) {
				cur = slices.Grow(cur, 4<<10)
			}
		}
		return fn(fd, cur)
	})
}

// writableAs is writable with the access mode given (O_WRONLY, O_RDWR);
// fn also gets the file's fstat, taken when it was opened.
func (b *Backend) writableAs(p string, mode int, fn func(fd int, st *unix.Stat_t) error) error {
	// O_NONBLOCK: opening a FIFO must not wait for a reader (refused
	// below); it changes nothing for a regular file.
	fd, ok, err := b.openBeneath(p, uint64(mode)|unix.O_NONBLOCK)
	if ok && err != nil {
		return err
	}
	if ok {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			defer unix.Close(fd)
			return fn(fd, &st)
		}
		unix.Close(fd)
	}
	f, err := b.openRegular(p, mode)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	return fn(int(f.Fd()), &st)
}

// fdRW is a descriptor opened for an in-place write (rwFile).
type fdRW int

// WriteAt writes all of data at off (pwrite(2), again after a short
// write).
func (fd fdRW) WriteAt(data []byte, off int64) (int, error) {
	for done := 0; done < len(data); {
		n, err := unix.Pwrite(int(fd), data[done:], off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return len(data), nil
}

func (fd fdRW) Truncate(size int64) error { return unix.Ftruncate(int(fd), size) }

func (fd fdRW) Datasync() error { return unix.Fdatasync(int(fd)) }

// openRegular opens p for writing (mode: O_WRONLY or O_RDWR), refusing
// anything but a regular file (never through a link).
func (b *Backend) openRegular(p string, mode int) (*os.File, error) {
	r, err := b.open(p)
	if err != nil {
		return nil, err
	}
	fi, err := r.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	return r.OpenFile(p, mode|unix.O_NOFOLLOW, 0)
}
