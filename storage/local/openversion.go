package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// openVersion (Open with Versioned) streams p's bytes and gives their version once read, as
// ReadVersion would: a stamp or a settled stat of a large file where the
// system allows it (known before the read), else the content's digest
// (hashed as read). Reread reads the opened file again (the same file,
// whatever replaced p since), checked to be the same bytes.
func (b *Backend) openVersion(ctx context.Context, p string) (_ storage.Reader, err error) {
	defer b.classifyTo(&err)
	begin := time.Now()
	rc, err := b.sys.open(p)
	if err != nil {
		return storage.Reader{}, err
	}
	f := &versionedFile{b: b, p: p, rc: rc, size: -1}
	if s, ok := rc.(sizer); ok {
		f.size = s.Size()
	}
	f.pre, f.preSize, f.hasPre = b.sys.versionBeforeRead(rc, begin)
	var r io.Reader = rc
	if !f.hasPre {
		f.sha = sha256.New()
		r = io.TeeReader(rc, f.sha)
	}
	f.tally = storage.NewTally(r)
	return storage.Reader{ReadCloser: f, Size: f.size, Version: f.version, Reread: f.reread}, nil
}

// versionBeforeRead: the portable implementation versions every file by
// its content.
func (portableImpl) versionBeforeRead(io.ReadCloser, time.Time) (storage.Version, int64, bool) {
	return "", 0, false
}

// versionedFile is one openVersion.
type versionedFile struct {
	b     *Backend
	p     string
	rc    io.ReadCloser
	size  int64
	tally *storage.Tally

	// pre is the version known before the read, for preSize bytes.
	pre     storage.Version
	preSize int64
	hasPre  bool
	sha     hash.Hash // the content's, without pre
}

func (f *versionedFile) Read(p []byte) (int, error) { return f.tally.Read(p) }

func (f *versionedFile) Close() error { return f.rc.Close() }

func (f *versionedFile) version() (storage.Version, error) {
	done, n := f.tally.Done()
	switch {
	case !done:
		return "", fmt.Errorf("version of %q in %s asked before its end was read", f.p, f.b.root)
	case f.hasPre && n == f.preSize:
		return f.pre, nil
	case f.sha != nil:
		return storage.Version(catalog.Digest(f.sha.Sum(nil))), nil
	}
	return "", fmt.Errorf("%q in %s changed while it was read: %w", f.p, f.b.root, storage.ErrConflict)
}

func (f *versionedFile) reread(ctx context.Context) (io.ReadCloser, error) {
	if done, _ := f.tally.Done(); !done {
		return nil, errors.New("reread before the first read ended")
	}
	what := fmt.Sprintf("%q in %s", f.p, f.b.root)
	if ra, ok := readerAt(f.rc); ok {
		_, n := f.tally.Done()
		return f.tally.Same(io.NopCloser(io.NewSectionReader(ra, 0, n+1)), what), nil
	}
	rc, err := f.b.sys.open(f.p)
	if err != nil {
		return nil, Classify(f.b.root, err)
	}
	return f.tally.Same(rc, what), nil
}
