package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

// OverwriteSyncIfEmpty is OverwriteSync of p while it is empty or missing
// (the intent: WriteIntent): its bytes are read and rewritten through one
// descriptor. A missing p is created durably, only where nothing is.
func (b *Backend) OverwriteSyncIfEmpty(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.checkedWritable(p, func(fd int, cur []byte) error {
		if len(cur) > 0 {
			return fmt.Errorf("%q holds %d bytes: %w", p, len(cur), storage.ErrConflict)
		}
		return b.rewriteFD(fd, p, data, true)
	})
	return b.overwritten(ctx, p, data, err, true, storage.PutOptions{IfAbsent: true})
}

// EmptyDeferSyncIf is EmptyDeferSync of p while it holds exactly want
// (ClearIntent), checked through the descriptor it truncates.
func (b *Backend) EmptyDeferSyncIf(ctx context.Context, p string, want []byte) (err error) {
	return b.emptyDeferSyncIf(ctx, p, func(cur []byte) bool { return bytes.Equal(cur, want) })
}

// emptyDeferSyncIf is EmptyDeferSync of p while its bytes pass holds.
func (b *Backend) emptyDeferSyncIf(ctx context.Context, p string, holds func(cur []byte) bool) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.checkedWritable(p, func(fd int, cur []byte) error {
		if !holds(cur) {
			return fmt.Errorf("%q holds other bytes: %w", p, storage.ErrConflict)
		}
		return unix.Ftruncate(fd, 0)
	})
	if missing(err) {
		return fmt.Errorf("empty %q in %s: it is gone: %w", p, b.root, storage.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	return nil
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

// Overwrite writes data over p's bytes in place, without a flush
// (storage.Backend.Overwrite): one open, a write and a truncation, no new file
// and no rename. A missing p is created as by Put with DeferSync.
func (b *Backend) Overwrite(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.writable(p, func(fd int) error { return b.rewriteFD(fd, p, data, false) })
	return b.overwritten(ctx, p, data, err, false, storage.PutOptions{})
}

// OverwriteSync writes data over p's bytes in place and flushes them
// (fdatasync: the data and the size) before it returns: one flush, no new
// name, so no folder to flush. A missing p is created durably (Put). A
// crash before it returns may leave p holding any mix of its old and new
// bytes, or neither: the caller recognises that.
func (b *Backend) OverwriteSync(ctx context.Context, p string, data []byte) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	err = b.writable(p, func(fd int) error { return b.rewriteFD(fd, p, data, true) })
	return b.overwritten(ctx, p, data, err, true, storage.PutOptions{})
}

// rewriteFD writes data over the bytes of fd (p's) and cuts it to
// data's size, then flushes it (fdatasync) when durable.
func (b *Backend) rewriteFD(fd int, p string, data []byte, durable bool) error {
	if err := pwriteAll(fd, data); err != nil {
		return err
	}
	if err := unix.Ftruncate(fd, int64(len(data))); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	if err := unix.Fdatasync(fd); err != nil {
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

// EmptyDeferSync truncates p to nothing without a flush; a missing p is
// not an error. Sync, SyncEmptied or the next OverwriteSync of p (the
// same file) makes it durable.
func (b *Backend) EmptyDeferSync(ctx context.Context, p string) (err error) {
	defer b.classifyTo(&err)
	err = b.writable(p, func(fd int) error { return unix.Ftruncate(fd, 0) })
	if missing(err) {
		return nil
	}
	if err != nil {
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
	err = b.writable(p, func(fd int) error {
		if err := unix.Fdatasync(fd); err != nil {
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

// writable runs fn on p opened for writing: a regular file below the
// root, never reached through a link. One openat2 where the kernel has it
// (no walk, no poller set-up: this runs twice per publication); the
// general path otherwise, which also explains a refusal.
func (b *Backend) writable(p string, fn func(fd int) error) error {
	return b.writableAs(p, unix.O_WRONLY, func(fd int, _ *unix.Stat_t) error { return fn(fd) })
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

// pwriteAll writes data at offset 0 of fd.
func pwriteAll(fd int, data []byte) error {
	for off := 0; off < len(data); {
		n, err := unix.Pwrite(fd, data[off:], int64(off))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

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
