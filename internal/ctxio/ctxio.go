// Package ctxio makes long copies stop when their context ends: io.Copy
// and friends know nothing of contexts, and a read of a local file does
// not block long enough for anything else to notice.
package ctxio

import (
	"context"
	"io"
)

// Reader reads from r until ctx ends; from then on every Read returns
// ctx's error.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return reader{ctx, r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
