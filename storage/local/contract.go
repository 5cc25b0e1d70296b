package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// intentPath is the one file a root's intent is rewritten in.
const intentPath = catalog.ReservedDir + "/intent.json"

// Properties: the intent is rewritten in place; a folder may hold links.
func (b *Backend) Properties() storage.Properties {
	return storage.Properties{TornIntents: true, Symlinks: true}
}

// WriteIntent rewrites the intent file in place (one data flush, no new
// name, so no folder flush), checked empty through the descriptor it
// writes, under the root's compare-and-swap lock: of writers that find it
// empty at once, one writes and the others see its bytes.
func (b *Backend) WriteIntent(ctx context.Context, data []byte) (_ storage.Version, err error) {
	defer b.classifyTo(&err)
	unlock, err := b.sys.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := b.overwriteSyncIfEmpty(ctx, intentPath, data); err != nil {
		return "", err
	}
	return Version(data), nil
}

// ReadIntent reads the intent file; an emptied one is none.
func (b *Backend) ReadIntent(ctx context.Context) ([]byte, storage.Version, error) {
	data, v, err := b.ReadVersion(ctx, intentPath)
	if err != nil || v == "" {
		return nil, "", err
	}
	v = Version(data)
	if len(data) == 0 {
		data = nil
	}
	return data, v, nil
}

// ClearIntent empties the intent file in place, without a flush; at a
// version, under the compare-and-swap lock (as WriteIntent), so that an
// intent written after the check is never the one emptied.
func (b *Backend) ClearIntent(ctx context.Context, want storage.Version) (err error) {
	if want == "" {
		return b.emptyDeferSync(ctx, intentPath)
	}
	defer b.classifyTo(&err)
	unlock, err := b.sys.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return b.emptyDeferSyncIf(ctx, intentPath, func(cur []byte) bool { return Version(cur) == want })
}

// SyncIntent flushes the intent file (its size).
func (b *Backend) SyncIntent(ctx context.Context) error {
	return b.syncEmptied(ctx, intentPath)
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
func (b *Backend) PrepareCatalog(ctx context.Context, next *catalog.Catalog, writes int) storage.PendingCatalog {
	c := &pendingCatalog{b: b, next: next, done: make(chan struct{})}
	streamMin := b.streamMin
	if streamMin <= 0 {
		streamMin = defaultStreamMin
	}
	switch large := len(next.Outputs) > streamMin; {
	case large && writes >= aheadMinWrites:
		var cctx context.Context
		cctx, c.cancel = context.WithCancel(ctx)
		go func() {
			defer close(c.done)
			c.pv, c.err = b.prepareStream(cctx, catalog.FileName, func(w io.Writer) error { return catalog.MarshalTo(w, next) })
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
	b    *Backend
	next *catalog.Catalog

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
		var data []byte
		if data, c.err = catalog.Marshal(c.next); c.err == nil {
			c.pv, c.err = c.b.prepareBytes(ctx, catalog.FileName, data)
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
		return "", fmt.Errorf("commit %s: %w", catalog.FileName, err)
	}
	if c.stream {
		var merr error
		v, err := c.b.writeIfVersionFrom(ctx, catalog.FileName, func(w io.Writer) error {
			merr = catalog.MarshalTo(w, c.next)
			return merr
		}, want)
		if errors.Is(merr, catalog.ErrInvalid) {
			return "", merr
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
