package local

import (
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// directReadMin is the size from which a versioned read (a catalog) of a
// file the page cache does not hold reads it directly (O_DIRECT): a
// catalog written directly (copyDirect) is read so by the next
// publication, twice (its scan and its merge's reread), without filling
// the cache with half a gigabyte of fresh pages it never reads again. A
// file the cache holds is read from there.
const directReadMin = 16 << 20

// readUncachedDirectly returns rc reading directly when it is a file of
// at least directReadMin bytes that the page cache does not hold (where
// any of its first, middle and last bytes is not cached); else rc.
func readUncachedDirectly(rc io.ReadCloser) io.ReadCloser {
	f, ok := rc.(*fdFile)
	if !ok || f.size < directReadMin || cached(int(f.fd.Load()), f.size) {
		return rc
	}
	dw := directWriter{f: f} // the same status flag turns direct reads on
	if !dw.start() {
		return rc
	}
	return &directFile{f: f, seq: directWindow{buf: alignedBuffer(directChunk)}, at: directWindow{buf: alignedBuffer(directChunk)}}
}

// cached reports whether the page cache holds the bytes of the file fd
// (size bytes) at its start, middle and end, asking without reading
// (RWF_NOWAIT); a system that cannot tell counts as holding them.
func cached(fd int, size int64) bool {
	var b [1]byte
	for _, off := range []int64{0, size / 2, size - 1} {
		_, err := unix.Preadv2(fd, [][]byte{b[:]}, off, unix.RWF_NOWAIT)
		if errors.Is(err, unix.EAGAIN) {
			return false
		}
	}
	return true
}

// directFile reads a file directly, in aligned chunks of directChunk
// copied out: its reads in order (Read, through seq) and a reread at
// offsets (ReadAt, through at: the merge's, in order too). Each window
// reads the chunk after the one it holds ahead, while it is copied out.
type directFile struct {
	f   *fdFile
	pos int64 // Read's offset
	seq directWindow
	at  directWindow
}

func (d *directFile) Read(p []byte) (int, error) {
	n, err := d.seq.readAt(d.f, p, d.pos)
	d.pos += int64(n)
	return n, err
}

func (d *directFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		k, err := d.at.readAt(d.f, p[n:], off+int64(n))
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close waits for the reads ahead (they use the descriptor), then closes
// the file.
func (d *directFile) Close() error {
	d.seq.settle()
	d.at.settle()
	return d.f.Close()
}

// Size is the file's size when it was opened.
func (d *directFile) Size() int64 { return d.f.size }

// directWindow is a chunk of a file read directly, and the read of the
// next one under way.
type directWindow struct {
	buf   []byte // aligned
	off   int64  // the file's offset of buf[0]
	n     int    // bytes of buf read
	spare []byte // a buffer for the next read ahead

	ahead    chan directRead // the read ahead, nil when none
	aheadOff int64
}

// directRead is a read ahead's result.
type directRead struct {
	buf []byte
	n   int
	err error
}

// readAt copies into p what lies at off, loading the aligned chunk that
// holds it first if the window does not; io.EOF past the file's end.
func (w *directWindow) readAt(f *fdFile, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < w.off || off >= w.off+int64(w.n) {
		if err := w.load(f, off&^(directAlign-1)); err != nil {
			return 0, err
		}
		if off >= w.off+int64(w.n) {
			return 0, io.EOF
		}
	}
	return copy(p, w.buf[off-w.off:w.n]), nil
}

// load fills the window with the chunk at start (the read ahead's, when
// it is that one) and, unless it is the file's last, starts reading the
// next.
func (w *directWindow) load(f *fdFile, start int64) error {
	var n int
	var err error
	if w.ahead != nil && w.aheadOff == start {
		r := <-w.ahead
		w.ahead, w.spare, w.buf = nil, w.buf, r.buf
		n, err = r.n, r.err
	} else {
		w.settle()
		n, err = preadDirect(f, w.buf, start)
	}
	w.off, w.n = start, n
	if err != nil || n < len(w.buf) {
		return err
	}
	next, buf := start+int64(n), w.spare
	if buf == nil {
		buf = alignedBuffer(len(w.buf))
	}
	ch := make(chan directRead, 1)
	w.ahead, w.aheadOff, w.spare = ch, next, nil
	go func() {
		n, err := preadDirect(f, buf, next)
		ch <- directRead{buf, n, err}
	}()
	return nil
}

// settle waits for the read ahead, if any, and keeps its buffer.
func (w *directWindow) settle() {
	if w.ahead != nil {
		w.spare = (<-w.ahead).buf
		w.ahead = nil
	}
}

// preadDirect fills buf from the file at off (aligned), short only at
// the file's end.
func preadDirect(f *fdFile, buf []byte, off int64) (int, error) {
	fd := int(f.fd.Load())
	n := 0
	for n < len(buf) {
		k, err := unix.Pread(fd, buf[n:], off+int64(n))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return n, f.pathErr("read", err)
		case k == 0:
			return n, nil
		}
		n += k
		if n&(directAlign-1) != 0 {
			return n, nil // a short read not on a block's edge: the end
		}
	}
	return n, nil
}
