package s3

import (
	"io"
	"slices"
)

// pieces is a document's bytes kept in the pieces they were written in:
// a catalog of megabytes is not copied again each time a buffer for all of
// it would have to grow. Its ReadAt serves an io.SectionReader, the
// seekable body a request needs (the SDK rewinds it to retry).
type pieces struct {
	parts [][]byte
	ends  []int64 // ends[i]: offset just past parts[i]
}

func (p *pieces) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.parts = append(p.parts, slices.Clone(b)) // the writer may reuse b
	p.ends = append(p.ends, p.size()+int64(len(b)))
	return len(b), nil
}

// size is how many bytes were written.
func (p *pieces) size() int64 {
	if len(p.ends) == 0 {
		return 0
	}
	return p.ends[len(p.ends)-1]
}

func (p *pieces) ReadAt(b []byte, off int64) (int, error) {
	// The first piece ending past off holds it.
	i, _ := slices.BinarySearch(p.ends, off+1)
	n := 0
	for n < len(b) && i < len(p.parts) {
		start := p.ends[i] - int64(len(p.parts[i]))
		c := copy(b[n:], p.parts[i][off+int64(n)-start:])
		n += c
		i++
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// reader reads the bytes from their start.
func (p *pieces) reader() *io.SectionReader { return io.NewSectionReader(p, 0, p.size()) }
