package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

var _ storage.InPlaceWriter = (*Backend)(nil)

// OverwriteSync writes data over p's bytes in place and flushes them
// (fdatasync: the data and the size) before it returns: one flush, no new
// name, so no folder to flush. A missing p is created durably (Put). A
// crash before it returns may leave p holding any mix of its old and new
// bytes, or neither (storage.InPlaceWriter): the caller recognises that.
func (b *Backend) OverwriteSync(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := b.openRegular(p)
	if isMissing(err) {
		_, err = b.writeAtomic(ctx, nil, p, bytes.NewReader(data), int64(len(data)), true, storage.PutOptions{})
		return err
	}
	if err != nil {
		return fmt.Errorf("overwrite %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("overwrite %q in %s: %w", p, b.root, err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return fmt.Errorf("overwrite %q in %s: %w", p, b.root, err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("overwrite %q in %s: sync: %w", p, b.root, err)
	}
	b.synced("file", path.Dir(p))
	return nil
}

// EmptyDeferSync truncates p to nothing without a flush; a missing p is
// not an error. Sync, SyncEmptied or the next OverwriteSync of p (the
// same file) makes it durable.
func (b *Backend) EmptyDeferSync(ctx context.Context, p string) (err error) {
	defer b.classifyTo(&err)
	f, err := b.openRegular(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	return nil
}

// SyncEmptied makes an earlier EmptyDeferSync of p durable (fdatasync of
// the file: its size).
func (b *Backend) SyncEmptied(ctx context.Context, p string) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := b.openRegular(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %q in %s: %w", p, b.root, err)
	}
	b.synced("file", path.Dir(p))
	return nil
}

// openRegular opens p for writing, refusing anything but a regular file
// (never through a link).
func (b *Backend) openRegular(p string) (*os.File, error) {
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
	return r.OpenFile(p, os.O_WRONLY|unix.O_NOFOLLOW, 0)
}
