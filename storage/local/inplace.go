package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/distributor/distributor/storage"
)

// rwFile is a file opened for an in-place write (impl.writable): a
// descriptor on Linux, an os.File elsewhere.
type rwFile interface {
	// WriteAt writes all of p at off.
	WriteAt(p []byte, off int64) (int, error)
	Truncate(size int64) error

	// Datasync flushes the file's bytes and size (fdatasync).
	Datasync() error
}

// overwriteSyncIfEmpty is overwriteSync of p while it is empty or missing
// (the intent: WriteIntent): its bytes are read and rewritten through one
// open file. A missing p is created durably, only where nothing is.
func (b *Backend) overwriteSyncIfEmpty(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.sys.writable(p, true, func(f rwFile, cur []byte) error {
		if len(cur) > 0 {
			return fmt.Errorf("%q holds %d bytes: %w", p, len(cur), storage.ErrConflict)
		}
		return b.rewrite(f, p, data, true)
	})
	return b.overwritten(ctx, p, data, err, true, storage.PutOptions{IfAbsent: true})
}

// emptyDeferSyncIfBytes is emptyDeferSync of p while it holds exactly want
// (ClearIntent), checked through the open file it truncates.
func (b *Backend) emptyDeferSyncIfBytes(ctx context.Context, p string, want []byte) (err error) {
	return b.emptyDeferSyncIf(ctx, p, func(cur []byte) bool { return bytes.Equal(cur, want) })
}

// emptyDeferSyncIf is emptyDeferSync of p while its bytes pass holds.
func (b *Backend) emptyDeferSyncIf(ctx context.Context, p string, holds func(cur []byte) bool) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.sys.writable(p, true, func(f rwFile, cur []byte) error {
		if !holds(cur) {
			return fmt.Errorf("%q holds other bytes: %w", p, storage.ErrConflict)
		}
		return f.Truncate(0)
	})
	if missing(err) {
		return fmt.Errorf("empty %q in %s: it is gone: %w", p, b.root, storage.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	return nil
}

// Overwrite writes data over p's bytes in place, without a flush
// (storage.Backend.Overwrite): one open, a write and a truncation, no new file
// and no rename. A missing p is created as by Put with DeferSync.
func (b *Backend) Overwrite(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.sys.writable(p, false, func(f rwFile, _ []byte) error { return b.rewrite(f, p, data, false) })
	return b.overwritten(ctx, p, data, err, false, storage.PutOptions{})
}

// overwriteSync writes data over p's bytes in place and flushes them
// (fdatasync: the data and the size) before it returns: one flush, no new
// name, so no folder to flush. A missing p is created durably (Put). A
// crash before it returns may leave p holding any mix of its old and new
// bytes, or neither: the caller recognises that.
func (b *Backend) overwriteSync(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.sys.writable(p, false, func(f rwFile, _ []byte) error { return b.rewrite(f, p, data, true) })
	return b.overwritten(ctx, p, data, err, true, storage.PutOptions{})
}

// rewrite writes data over the bytes of f (p's) and cuts it to data's
// size, then flushes it (fdatasync) when durable.
func (b *Backend) rewrite(f rwFile, p string, data []byte, durable bool) error {
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	b.synced("file", path.Dir(p))
	return nil
}

// overwritten finishes an in-place write of data at p that ended with
// err: a missing p is created (Put, under cond, flushed when durable),
// another error is named.
func (b *Backend) overwritten(ctx context.Context, p string, data []byte, err error, durable bool, cond storage.PutOptions) error {
	if missing(err) {
		_, err = b.writeAtomic(ctx, nil, p, bytes.NewReader(data), int64(len(data)), durable, cond)
		return err
	}
	if err != nil {
		return fmt.Errorf("overwrite %q in %s: %w", p, b.root, err)
	}
	return nil
}

// emptyDeferSync truncates p to nothing without a flush; a missing p is
// not an error. Sync, syncEmptied or the next overwriteSync of p (the
// same file) makes it durable.
func (b *Backend) emptyDeferSync(ctx context.Context, p string) (err error) {
	defer b.classifyTo(&err)
	err = b.sys.writable(p, false, func(f rwFile, _ []byte) error { return f.Truncate(0) })
	if missing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	return nil
}

// syncEmptied makes an earlier emptyDeferSync of p durable (fdatasync of
// the file: its size).
func (b *Backend) syncEmptied(ctx context.Context, p string) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.sys.writable(p, false, func(f rwFile, _ []byte) error {
		if err := f.Datasync(); err != nil {
			return err
		}
		b.synced("file", path.Dir(p))
		return nil
	})
	if missing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %q in %s: %w", p, b.root, err)
	}
	return nil
}

func missing(err error) bool { return isMissing(err) || errors.Is(err, storage.ErrNotExist) }
