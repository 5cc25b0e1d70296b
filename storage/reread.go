package storage

import (
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Tally counts and checksums the bytes read through it (CRC-32C): what a
// backend's Reader.Reread checks a second read against.
type Tally struct {
	r   io.Reader
	sum hash.Hash32
	n   int64
	eof bool
}

// NewTally reads r through a tally.
func NewTally(r io.Reader) *Tally { return &Tally{r: r, sum: crc32.New(castagnoli)} }

func (t *Tally) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.sum.Write(p[:n])
	t.n += int64(n)
	if err == io.EOF {
		t.eof = true
	}
	return n, err
}

// Done reports whether the read reached its end, and how many bytes it read.
func (t *Tally) Done() (bool, int64) { return t.eof, t.n }

// Same returns rc reading a second time what t read: at its end, or past
// t's count, it fails with an error wrapping ErrConflict when the bytes
// differ from t's, named by what.
func (t *Tally) Same(rc io.ReadCloser, what string) io.ReadCloser {
	return &sameBytes{rc: rc, want: t.sum.Sum32(), n: t.n, sum: crc32.New(castagnoli), what: what}
}

type sameBytes struct {
	rc   io.ReadCloser
	want uint32
	n    int64
	sum  hash.Hash32
	read int64
	what string
}

func (s *sameBytes) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	s.sum.Write(p[:n])
	s.read += int64(n)
	if s.read > s.n || errors.Is(err, io.EOF) && (s.read != s.n || s.sum.Sum32() != s.want) {
		return n, fmt.Errorf("%s changed since it was read: %w", s.what, ErrConflict)
	}
	return n, err
}

func (s *sameBytes) Close() error { return s.rc.Close() }
