package local

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/distributor/distributor/storage"
)

// withSyncHook tells fn of every fsync the backend makes: kind "file" or
// "folder", and the folder.
func withSyncHook(fn func(kind, dir string)) Option { return func(b *Backend) { b.onSync = fn } }

// withGeneralHook tells fn of every operation that takes the general
// os.Root path instead of openat2.
func withGeneralHook(fn func(op string)) Option { return func(b *Backend) { b.onGeneral = fn } }

// readerSource is a Source of r: a second open rewinds it where it can.
func readerSource(r io.Reader) storage.Source {
	opened := false
	return func(context.Context) (io.ReadCloser, error) {
		if opened {
			s, ok := r.(io.Seeker)
			if !ok {
				return nil, errors.New("readerSource: opened twice")
			}
			if _, err := s.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
		}
		opened = true
		return io.NopCloser(r), nil
	}
}

// The in-place writes as the engine makes them (the intent, the
// fingerprint shards), by the names the tests below use.

func (b *Backend) overwriteSync(ctx context.Context, p string, data []byte) error {
	_, err := b.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{InPlace: true})
	return err
}

func (b *Backend) Overwrite(ctx context.Context, p string, data []byte) error {
	_, err := b.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{InPlace: true, DeferSync: true})
	return err
}

func (b *Backend) overwriteSyncIfEmpty(ctx context.Context, p string, data []byte) error {
	_, err := b.WriteIfVersion(ctx, p, data, "", storage.InPlace)
	return err
}

func (b *Backend) emptyDeferSync(ctx context.Context, p string) error {
	return b.DeleteIfVersion(ctx, p, "", storage.InPlace, storage.DeferSync)
}

func (b *Backend) emptyDeferSyncIfBytes(ctx context.Context, p string, want []byte) error {
	return b.DeleteIfVersion(ctx, p, Version(want), storage.InPlace, storage.DeferSync)
}
