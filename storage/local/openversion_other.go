//go:build !linux

package local

import (
	"io"
	"os"
)

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
