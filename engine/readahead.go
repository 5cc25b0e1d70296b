package engine

import (
	"context"
	"sync"

	"github.com/distributor/distributor/storage"
)

// ReadAhead is a root's catalog being read before the publication that
// needs it is built (Engine.ReadAhead).
type ReadAhead struct {
	read   func() catalogRead
	cancel context.CancelFunc
}

// ReadAhead begins reading (and, when small, parsing) root's catalog, the
// first thing a publication into root needs, so that the caller can build the publication (open its
// bundle) meanwhile. Call it under the lease the publication runs under,
// once the lease is held: the catalog read is the plan's. Publish takes
// over the ReadAhead handed to it in Publication.ReadAhead (for the same
// root); one that is not handed over is Closed.
func (e *Engine) ReadAhead(ctx context.Context, root storage.Backend) *ReadAhead {
	ctx, cancel := context.WithCancel(ctx)
	read := make(chan catalogRead, 1)
	go func() { read <- openCatalog(ctx, root, e.wholeCatalog()) }()
	return &ReadAhead{read: sync.OnceValue(func() catalogRead { return <-read }), cancel: cancel}
}

// Close stops the reading and waits for it to end (nothing to do when a
// is nil).
func (a *ReadAhead) Close() {
	if a == nil {
		return
	}
	a.cancel()
	a.read().close()
}

// reading is what a publication takes over (nil when a is).
func (a *ReadAhead) reading() func() catalogRead {
	if a == nil {
		return nil
	}
	return a.read
}
