//go:build !linux

package local

import (
	"io"
	"os"
	"time"

	"github.com/distributor/distributor/storage"
)

// versionBeforeRead: without stamps or settled stats a file is versioned
// by its content.
func (b *Backend) versionBeforeRead(io.ReadCloser, time.Time) (storage.Version, int64, bool) {
	return "", 0, false
}

// readerAt reads the opened file rc at offsets, leaving its own offset
// alone.
func readerAt(rc io.ReadCloser) (io.ReaderAt, bool) {
	switch f := rc.(type) {
	case sizedFile:
		return f.File, true
	case *os.File:
		return f, true
	}
	return nil, false
}
