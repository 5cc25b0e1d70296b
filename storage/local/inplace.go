package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// rewriteIfVersion writes data over p's bytes in place while p holds
// version want (content versions; "": empty or missing), checked through
// the open file it writes, under the root's compare-and-swap lock: of
// writers that find it empty at once, one writes and the others see its
// bytes. Durable: one data flush (fdatasync), no new name, so no folder
// flush. A missing p is created, only where nothing is.
func (b *Backend) rewriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, durable bool) (_ storage.Version, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	unlock, err := b.sys.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	err = b.sys.writable(p, true, func(f rwFile, cur []byte) error {
		if want == "" && len(cur) > 0 || want != "" && (len(cur) == 0 || Version(cur) != want) {
			return fmt.Errorf("%q holds other bytes: %w", p, storage.ErrConflict)
		}
		return b.rewrite(f, p, data, durable)
	})
	if missing(err) && want != "" {
		return "", fmt.Errorf("write %q in %s: it is gone: %w", p, b.root, storage.ErrConflict)
	}
	if err := b.overwritten(ctx, p, data, err, durable, storage.PutOptions{IfAbsent: true}); err != nil {
		return "", err
	}
	if !durable {
		b.dirty.file(p)
	}
	return Version(data), nil
}

// emptyIfVersion empties p in place while it holds version want (content
// versions; "": whatever it holds), under the compare-and-swap lock (as
// rewriteIfVersion), so that bytes written after the check are never the
// ones emptied. Not durable: Sync (which then flushes this file alone),
// or the next durable rewrite of p (the same file), makes it so.
func (b *Backend) emptyIfVersion(ctx context.Context, p string, want storage.Version, durable bool) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := b.sys.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	err = b.sys.writable(p, true, func(f rwFile, cur []byte) error {
		if want != "" && Version(cur) != want {
			return fmt.Errorf("%q holds other bytes: %w", p, storage.ErrConflict)
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		if durable {
			return f.Datasync()
		}
		return nil
	})
	if missing(err) {
		if want == "" {
			return nil
		}
		return fmt.Errorf("empty %q in %s: it is gone: %w", p, b.root, storage.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("empty %q in %s: %w", p, b.root, err)
	}
	if !durable {
		b.dirty.file(p)
	}
	return nil
}

// putInPlace writes src over p's bytes in place (Put with InPlace): one
// open, a write and a truncation, no new file and no rename; flushed
// when durable. A missing p is created as by Put.
func (b *Backend) putInPlace(ctx context.Context, p string, src io.Reader, size int64, durable bool) (storage.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	data, err := readSized(src, size)
	if err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("write %q in %s: %w", p, b.root, err)
	}
	err = b.sys.writable(p, false, func(f rwFile, _ []byte) error { return b.rewrite(f, p, data, durable) })
	if err := b.overwritten(ctx, p, data, err, durable, storage.PutOptions{}); err != nil {
		return storage.ObjectInfo{}, err
	}
	if !durable {
		b.dirty.file(p)
	}
	return storage.ObjectInfo{Path: p, Size: int64(len(data))}, nil
}

// readSized reads all of r, in one buffer when size is known.
func readSized(r io.Reader, size int64) ([]byte, error) {
	if br, ok := r.(*bytes.Reader); ok && size >= 0 && int64(br.Len()) == size {
		data := make([]byte, size)
		_, err := io.ReadFull(br, data)
		return data, err
	}
	if size < 0 {
		return io.ReadAll(r)
	}
	var buf bytes.Buffer
	buf.Grow(int(size))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
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
		if err == nil && !durable {
			b.dirty.entry(p)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("overwrite %q in %s: %w", p, b.root, err)
	}
	return nil
}

// syncFew makes earlier changes of a few files and folders durable: an
// fdatasync of each file (its bytes and size) still there, an fsync of
// each folder still there.
func (b *Backend) syncFew(ctx context.Context, files, dirs []string) (err error) {
	defer b.classifyTo(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, p := range files {
		err := b.sys.writable(p, false, func(f rwFile, _ []byte) error {
			if err := f.Datasync(); err != nil {
				return err
			}
			b.synced("file", path.Dir(p))
			return nil
		})
		if err != nil && !missing(err) {
			return fmt.Errorf("sync %q in %s: %w", p, b.root, err)
		}
	}
	for _, dir := range dirs {
		if err := b.sys.syncDir(dir); err != nil && !missing(err) {
			return fmt.Errorf("sync %q in %s: %w", dir, b.root, err)
		}
	}
	return nil
}

func missing(err error) bool { return isMissing(err) || errors.Is(err, storage.ErrNotExist) }
