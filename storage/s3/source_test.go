package s3_test

import (
	"context"
	"errors"
	"io"

	"github.com/distributor/distributor/storage"
)

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
