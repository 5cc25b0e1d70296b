package engine

import (
	"context"

	"github.com/distributor/distributor/storage"
)

// ReadAhead is a root's catalog being read and parsed before the
// publication that needs it is built (Engine.ReadAhead).
type ReadAhead struct {
	r      *reading
	cancel context.CancelFunc
}

// ReadAhead begins reading and parsing root's catalog, the first thing a
// publication into root needs, so that the caller can build the
// publication (open its bundle) meanwhile. Call it under the lease the
// publication runs under, once the lease is held: the catalog read is the
// plan's. Publish takes over the ReadAhead handed to it in
// Publication.ReadAhead (for the same root); one that is not handed over
// is Closed.
func (e *Engine) ReadAhead(ctx context.Context, root storage.Backend) *ReadAhead {
	ctx, cancel := context.WithCancel(ctx)
	return &ReadAhead{r: readInBackground(ctx, root), cancel: cancel}
}

// Close stops the reading and waits for it to end (nothing to do when a
// is nil).
func (a *ReadAhead) Close() {
	if a == nil {
		return
	}
	a.cancel()
	a.r.wait()
}

// reading is what a publication takes over (nil when a is).
func (a *ReadAhead) reading() *reading {
	if a == nil {
		return nil
	}
	return a.r
}
