package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/distributor/distributor/storage"
)

// errStopped is what a streamed write sees when the write it feeds failed.
var errStopped = errors.New("the write it feeds stopped")

// writeIfVersionFrom writes what write writes at p only if p's current
// version is want, like WriteIfVersion, without holding the bytes: they go
// through a pipe into the temp file, which is renamed over p only once
// write returned nil. The result is stamped (stamp_linux.go); without a
// stamp it is the content's version, read back.
func (b *Backend) writeIfVersionFrom(ctx context.Context, p string, write func(io.Writer) error, want storage.Version) (_ storage.Version, err error) {
	defer b.classifyTo(&err)
	unlock, err := b.sys.lockAt(ctx, "write", p, want)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := piped(write, func(src io.Reader) error {
		_, err := b.writeAtomic(ctx, b.r, p, src, -1, true, storage.PutOptions{})
		return err
	}); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", p, b.root, err)
	}
	if v, ok := b.sys.stamp(p); ok {
		return v, nil
	}
	v, err := b.versionByContent(b.r, p)
	return v, err
}

// piped gives put the bytes write writes, through a pipe: never held
// whole. write's own failure comes first; errStopped only follows a
// failed put.
func piped(write func(io.Writer) error, put func(io.Reader) error) error {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		// Small: it gathers the small writes; a large one (an encoder's
		// chunk) passes through uncopied when it finds the buffer empty.
		bw := bufio.NewWriterSize(pw, 64<<10)
		err := write(bw)
		if err == nil {
			err = bw.Flush()
		}
		werr <- err
		pw.CloseWithError(err) // nil: the reader sees EOF
	}()
	err := put(pr)
	pr.CloseWithError(errStopped) // a write still in flight ends
	if wErr := <-werr; wErr != nil && !errors.Is(wErr, errStopped) {
		return wErr
	}
	return err
}
