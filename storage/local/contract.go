package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/distributor/distributor/storage"
)

// Properties: writes InPlace are rewrites in place; a folder may hold
// links; the root is a folder held open.
func (b *Backend) Properties() storage.Properties {
	return storage.Properties{TornInPlace: true, Symlinks: true, HeldFolder: b.held}
}

// Find lists the root, or looks q.Paths up one by one when they are few
// against what the root holds (storage.LookUp).
func (b *Backend) Find(ctx context.Context, q storage.Query, fn func(storage.ObjectInfo) error) error {
	// Stat does not watch ctx: lookups of objects alone would not see it
	// cancelled.
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.Paths == nil || q.Held.Paths == nil || len(q.Paths)*lookupRatio >= q.Held.AtMost {
		return b.List(ctx, "", fn)
	}
	if n, _ := q.Held.Paths(); len(q.Paths)*lookupRatio >= n {
		return b.List(ctx, "", fn)
	}
	return storage.LookUp(ctx, b, q.Paths, fn)
}

// lookupRatio: a write of fewer paths than 1/lookupRatio of the objects
// a root holds looks them up instead of listing the root: adding ten
// outputs to a root of a million must not read a million entries.
const lookupRatio = 1000

// Catalog commits. A catalog larger than streamMin records is encoded as
// it is written, never held whole (half a gigabyte at a million records):
// beside the caller's writes into an unnamed file when there are at
// least aheadMinWrites of them (the Sync before the commit then makes it
// durable with them, and the commit swaps it in), else by the commit
// itself. A smaller one is written under a temp name by the Sync before
// the commit (one barrier for its bytes and the outputs'), or by the
// commit when no Sync comes first.
const (
	defaultStreamMin = 2048
	aheadMinWrites   = 8
)

// WithStreamMinOutputs sets the catalog size (records) past which a
// catalog is encoded as it is written (tests: a small root takes a large
// catalog's path).
func WithStreamMinOutputs(n int) Option {
	return func(b *Backend) { b.streamMin = n }
}

// PrepareCatalog begins next's commit (see Catalog commits above).
func (b *Backend) PrepareCatalog(ctx context.Context, doc storage.Document, writes int) storage.PendingCatalog {
	c := &pendingCatalog{b: b, doc: doc, done: make(chan struct{})}
	streamMin := b.streamMin
	if streamMin <= 0 {
		streamMin = defaultStreamMin
	}
	switch large := doc.Records > streamMin; {
	case large && writes >= aheadMinWrites:
		var cctx context.Context
		cctx, c.cancel = context.WithCancel(ctx)
		go func() {
			defer close(c.done)
			c.pv, c.err = b.prepareStream(cctx, doc.Path, doc.Encode)
		}()
		b.pending.add(c)
	case large:
		c.stream = true
		close(c.done)
	default:
		c.deferred = true
		b.pending.add(c)
	}
	return c
}

// pendingCatalog is a catalog PrepareCatalog began.
type pendingCatalog struct {
	b   *Backend
	doc storage.Document

	// stream: Commit encodes it as it writes it.
	stream bool

	// deferred: written by the next Sync (or by Commit), not yet begun.
	deferred bool
	cancel   context.CancelFunc
	mu       sync.Mutex // guards the preparation below against Sync

	// closed: Close began; a Sync that took the catalog before readies
	// nothing.
	closed bool
	done   chan struct{}
	pv     preparedVersion
	err    error
}

// ready writes and names the catalog's bytes, before a Sync.
func (c *pendingCatalog) ready(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.deferred {
		c.deferred = false
		var buf bytes.Buffer
		if c.err = c.doc.Encode(&buf); c.err == nil {
			c.pv, c.err = c.b.prepareBytes(ctx, c.doc.Path, buf.Bytes())
		}
		close(c.done)
	}
	<-c.done
	if c.pv != nil && c.err == nil {
		c.err = c.pv.Place()
	}
}

func (c *pendingCatalog) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	c.b.pending.remove(c)
	if err := c.b.CheckRoot(ctx); err != nil {
		return "", fmt.Errorf("commit %s: %w", c.doc.Path, err)
	}
	if c.stream {
		var eerr error
		var w *watchedWriter
		v, err := c.b.writeIfVersionFrom(ctx, c.doc.Path, func(to io.Writer) error {
			w = &watchedWriter{w: to}
			eerr = c.doc.Encode(w)
			return eerr
		}, want)
		if eerr != nil && w.err == nil {
			return "", eerr // the document's own error (invalid), not the write's
		}
		return v, err
	}
	c.ready(ctx)
	if c.err != nil {
		return "", c.err
	}
	return c.pv.CommitIfVersion(ctx, want)
}

func (c *pendingCatalog) Close() error {
	c.b.pending.remove(c)
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Lock()
	c.closed = true
	deferred := c.deferred
	c.mu.Unlock()
	if deferred {
		return nil
	}
	<-c.done
	if c.pv != nil {
		return c.pv.Close()
	}
	return nil
}

// watchedWriter remembers the error its writer gave.
type watchedWriter struct {
	w   io.Writer
	err error
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// pendingCatalogs are the catalogs the next Sync writes and names first.
type pendingCatalogs struct {
	mu  sync.Mutex
	set map[*pendingCatalog]bool
}

func (p *pendingCatalogs) add(c *pendingCatalog) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set = map[*pendingCatalog]bool{}
	}
	p.set[c] = true
}

func (p *pendingCatalogs) remove(c *pendingCatalog) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.set, c)
}

// ready readies every pending catalog (a Sync follows).
func (p *pendingCatalogs) ready(ctx context.Context) {
	p.mu.Lock()
	cs := make([]*pendingCatalog, 0, len(p.set))
	for c := range p.set {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.ready(ctx)
	}
}
