package s3

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"sync/atomic"
)

// spool holds a document's bytes for a request body, which the SDK may
// read more than once (it rewinds the body to retry): in memory up to
// inMemory bytes, past that in a temporary file, so that a catalog of
// hundreds of megabytes is not held by the process while it is sent. It
// takes the bytes' sha256 as they are written. Where no temporary file
// can be made (no writable temporary folder) or it runs out of room, the
// bytes stay in memory, as many as they are.
type spool struct {
	inMemory int64  // bytes held in memory at most; negative: no limit
	dir      string // where the file goes ("" = os.TempDir())

	parts [][]byte // in memory: the pieces as written, never copied to grow
	ends  []int64  // ends[i]: offset just past parts[i]

	file     spoolFile // past inMemory: all the bytes
	unlinked bool      // the file's name is gone already (removed while open)
	closed   atomic.Bool

	// create makes the file (os.CreateTemp; tests make files that fail).
	create func(dir, pattern string) (spoolFile, error)

	// inMemoryAfter, when set, is told once why the bytes stay in memory
	// past inMemory.
	inMemoryAfter func(err error)

	size int64
	hash hash.Hash
}

// spoolFile is the file a spool writes past its memory.
type spoolFile interface {
	io.Writer
	io.ReaderAt
	Close() error
	Name() string
}

func newSpool(inMemory int64, dir string) *spool {
	return &spool{inMemory: inMemory, dir: dir, hash: sha256.New(), create: createTemp}
}

func createTemp(dir, pattern string) (spoolFile, error) { return os.CreateTemp(dir, pattern) }

func (s *spool) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if s.file == nil && s.inMemory >= 0 && s.size+int64(len(b)) > s.inMemory {
		s.spill()
	}
	if s.file != nil {
		if _, err := s.file.Write(b); err != nil {
			if err := s.unspill(); err != nil {
				return 0, err
			}
			s.stayInMemory(err)
		}
	}
	if s.file == nil {
		s.parts = append(s.parts, slices.Clone(b)) // the writer may reuse b
		s.ends = append(s.ends, s.size+int64(len(b)))
	}
	s.size += int64(len(b))
	s.hash.Write(b)
	return len(b), nil
}

// spill moves the bytes held so far into a new temporary file, which
// takes every later write. Without one, the bytes stay in memory.
func (s *spool) spill() {
	f, err := s.create(s.dir, "distributor-catalog-*")
	if err != nil {
		s.stayInMemory(err)
		return
	}
	// Removed at once where an open file may lose its name (not on
	// Windows): a process killed now leaves nothing behind.
	s.unlinked = os.Remove(f.Name()) == nil
	for _, p := range s.parts {
		if _, err := f.Write(p); err != nil {
			_ = s.discard(f) // the bytes stay in memory whatever becomes of it
			s.stayInMemory(err)
			return
		}
	}
	s.file, s.parts, s.ends = f, nil, nil
}

// stayInMemory keeps every later write in memory, and says why once.
func (s *spool) stayInMemory(why error) {
	s.inMemory = -1
	if s.inMemoryAfter != nil {
		s.inMemoryAfter(why)
		s.inMemoryAfter = nil
	}
}

// unspill brings the bytes in the file back into memory, which takes
// every later write: the file could not take more.
func (s *spool) unspill() error {
	data := make([]byte, s.size)
	if _, err := s.file.ReadAt(data, 0); err != nil {
		return fmt.Errorf("reading the catalog back from %s: %w", s.file.Name(), err)
	}
	_ = s.discard(s.file) // the bytes are in memory now whatever becomes of it
	s.file = nil
	if s.size > 0 {
		s.parts, s.ends = [][]byte{data}, []int64{s.size}
	}
	return nil
}

func (s *spool) ReadAt(b []byte, off int64) (int, error) {
	if s.file != nil {
		return s.file.ReadAt(b, off)
	}
	// The first piece ending past off holds it.
	i, _ := slices.BinarySearch(s.ends, off+1)
	n := 0
	for n < len(b) && i < len(s.parts) {
		start := s.ends[i] - int64(len(s.parts[i]))
		n += copy(b[n:], s.parts[i][off+int64(n)-start:])
		i++
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// reader reads the bytes from their start.
func (s *spool) reader() *io.SectionReader { return io.NewSectionReader(s, 0, s.size) }

// sum is the sha256 of the bytes written.
func (s *spool) sum() (sum [sha256.Size]byte) {
	s.hash.Sum(sum[:0])
	return sum
}

// Close drops the file and its name; closing again does nothing. It
// leaves the fields as they are: a request body may still be read after
// its request returned (the HTTP transport closes it in a goroutine of
// its own), and then reads an error.
func (s *spool) Close() error {
	if s.file == nil || !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.discard(s.file)
}

func (s *spool) discard(f spoolFile) error {
	err := f.Close()
	if !s.unlinked {
		if rerr := os.Remove(f.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
