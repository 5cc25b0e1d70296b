package local

import (
	"context"
	"errors"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/internal/ctxio"
)

// Direct writes (O_DIRECT) hand a file's bytes to the disk from the
// process's own buffer, in chunks of directChunk whose memory, offset and
// length are multiples of directAlign, and the last part, shorter, as
// usual. A streamed catalog is written so (stage.direct): half a
// gigabyte written once and read only by the next publication, which
// through the page cache costs the allocation of as many fresh pages (on
// a virtual machine that hands free memory back to its host, the host
// faults each one in again) and their writeback before the flush, and
// pushes out of the cache what other readers use. A direct write leaves
// nothing to write back: the flush that follows (fsync, syncfs) is still
// what makes the bytes durable.
const (
	directChunk = 4 << 20
	directAlign = 4 << 10
)

// copyDirect is copy for a file written directly: a file system that
// refuses direct writes (of the file, or of a chunk) gets the bytes, or
// the rest of them, written as usual. Two buffers take turns: one is
// filled from src while the disk writes the other.
func (b *Backend) copyDirect(ctx context.Context, f *fdFile, src io.Reader) (int64, error) {
	dw := &directWriter{f: f}
	if !dw.start() {
		return b.copy(ctx, f, src, -1, true)
	}
	free := make(chan []byte, 2)
	free <- alignedBuffer(directChunk)
	free <- alignedBuffer(directChunk)
	full := make(chan []byte)
	werr := make(chan error, 1)
	go func() {
		var err error
		for p := range full {
			if err == nil {
				err = dw.write(p)
			}
			free <- p[:cap(p)]
		}
		werr <- err
	}()
	n, last, err := fillChunks(ctxio.Reader(ctx, src), free, full)
	close(full)
	if wErr := <-werr; err == nil {
		err = wErr
	}
	if err != nil {
		return 0, err
	}
	dw.stop()
	if _, err := f.Write(last); err != nil {
		return 0, err
	}
	return n, nil
}

// fillChunks reads r into the free buffers, handing each full one on,
// until r ends: the last chunk's aligned part is handed on too, and the
// rest (shorter than directAlign) returned. n counts every byte read.
func fillChunks(r io.Reader, free <-chan []byte, full chan<- []byte) (n int64, last []byte, _ error) {
	for {
		buf := <-free
		k, err := io.ReadFull(r, buf)
		n += int64(k)
		switch {
		case err == nil:
			full <- buf
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			whole := k &^ (directAlign - 1)
			full <- buf[:whole]
			return n, buf[whole:k], nil
		default:
			return n, nil, err
		}
	}
}

// directWriter writes a file directly while it can.
type directWriter struct {
	f      *fdFile
	flags  int // the file's status flags without O_DIRECT
	direct bool
}

// start turns direct writes on; false when the file system has none.
func (w *directWriter) start() bool {
	fd := uintptr(w.f.fd.Load())
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	if _, err := unix.FcntlInt(fd, unix.F_SETFL, flags|unix.O_DIRECT); err != nil {
		return false
	}
	w.flags, w.direct = flags&^unix.O_DIRECT, true
	return true
}

// stop turns direct writes off: what follows is written as usual.
func (w *directWriter) stop() {
	if w.direct {
		_, _ = unix.FcntlInt(uintptr(w.f.fd.Load()), unix.F_SETFL, w.flags)
		w.direct = false
	}
}

// write writes p (aligned while direct); a direct write the file system
// refuses (EINVAL) is written again as usual, and so is all that follows.
func (w *directWriter) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	n, err := w.f.Write(p)
	if err != nil && w.direct && errors.Is(err, unix.EINVAL) {
		w.stop()
		_, err = w.f.Write(p[n:])
	}
	return err
}

// alignedBuffer is n bytes whose memory starts at a multiple of
// directAlign.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (directAlign - 1))
	if off != 0 {
		off = directAlign - off
	}
	return b[off : off+n : off+n]
}
