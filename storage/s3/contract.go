package s3

import (
	"context"
	"fmt"
	"os"

	"github.com/distributor/distributor/storage"
)

// Properties: every write is whole.
func (b *Backend) Properties() storage.Properties { return storage.Properties{} }

// Sync does nothing: every write is durable when its request returns.
func (b *Backend) Sync(context.Context) error { return nil }

// CheckRoot does nothing: a prefix has no identity to lose.
func (b *Backend) CheckRoot(context.Context) error { return nil }

// Find lists the root, split into ranges read at once where the paths
// to write or the catalog tell where (ListSplit), or looks the paths up
// one by one when they are few against what the root holds.
func (b *Backend) Find(ctx context.Context, q storage.Query, fn func(storage.ObjectInfo) error) error {
	held := q.Held
	switch n := len(q.Paths); {
	case held.Paths == nil:
		return b.List(ctx, "", fn)
	case q.Paths == nil:
	case n*lookupRatio < held.AtMost:
		if count, _ := held.Paths(); n*lookupRatio < count {
			return b.lookUp(ctx, q.Paths, fn)
		}
	case n >= 2*pageKeys && held.AtMost <= 4*n:
		// The catalog holds at most about twice the paths (a root
		// replaced, say): split at them now, not after the catalog's parse.
		return b.ListSplit(ctx, listSplits(n, func(i int) string { return q.Paths[i] }), fn)
	}
	return b.ListSplit(ctx, listSplits(held.Paths()), fn)
}

// lookUp is storage.LookUp, which lists under a path only where no object
// is at it, plus a listing under each path that is an object: keys are
// flat, so "p" and "p/x" may both be objects, and a write of p must know
// of both.
func (b *Backend) lookUp(ctx context.Context, paths []string, fn func(storage.ObjectInfo) error) error {
	seen := map[string]bool{}
	report := func(o storage.ObjectInfo) error {
		if seen[o.Path] {
			return nil
		}
		seen[o.Path] = true
		return fn(o)
	}
	if err := storage.LookUp(ctx, b, paths, report); err != nil {
		return err
	}
	for _, p := range paths {
		if seen[p] {
			if err := b.List(ctx, p+"/", report); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookupRatio: a write of fewer paths than 1/lookupRatio of the objects
// a root holds looks them up instead of listing (a listing request
// returns about that many objects).
const lookupRatio = pageKeys

// pageKeys is how many keys a listing request returns.
const pageKeys = 1000

// listSplits picks, of n paths in order, every pageKeys-th from the
// middle of the first page: the reserved files (.distributor…) sort
// before the outputs, and a first range of a whole page of outputs would
// take a second request, which the ranges after it wait for. Not the last
// path: the range after it would be one more request, for the objects
// past it (mostly none). None under two pages.
func listSplits(n int, path func(int) string) []string {
	if n < 2*pageKeys {
		return nil
	}
	splits := make([]string, 0, n/pageKeys+1)
	for i := pageKeys/2 - 1; i < n-1; i += pageKeys {
		splits = append(splits, path(i))
	}
	return splits
}

// PrepareCatalog encodes next and takes its sha256 (which signs the
// request and is stored with it) in the background, while the caller
// writes; Commit sends it in one conditional request. The bytes wait in
// a spool: a large catalog in a temporary file, not in memory.
func (b *Backend) PrepareCatalog(ctx context.Context, doc storage.Document, _ int) storage.PendingCatalog {
	c := &pendingCatalog{b: b, path: doc.Path, data: newSpool(b.catalogInMemory, ""), done: make(chan struct{})}
	if b.warn != nil {
		c.data.inMemoryAfter = func(err error) {
			b.warn(ctx, &InMemoryError{Catalog: b.String() + doc.Path, Dir: os.TempDir(), Err: err})
		}
	}
	go func() {
		defer close(c.done)
		c.err = doc.Encode(c.data)
	}()
	return c
}

// InMemoryError says that a catalog waits for its commit in memory, past
// Options.CatalogInMemory, because no temporary file could hold it
// (Options.Warn is told).
type InMemoryError struct {
	Catalog string // s3://bucket/prefix/.distributor.json
	Dir     string // the temporary folder
	Err     error
}

func (e *InMemoryError) Error() string {
	return fmt.Sprintf("the catalog %s waits for its commit in memory: no temporary file in %s holds it: %v (set TMPDIR to a folder on a disk with room)", e.Catalog, e.Dir, e.Err)
}

func (e *InMemoryError) Unwrap() error { return e.Err }

// pendingCatalog is a catalog being encoded for its commit.
type pendingCatalog struct {
	b    *Backend
	path string
	done chan struct{}
	data *spool
	err  error
}

func (c *pendingCatalog) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	<-c.done
	if c.err != nil {
		return "", c.err
	}
	return c.b.writeIfVersion(ctx, c.path, c.data.reader(), c.data.sum(), want)
}

// Close waits for the encoding and drops its bytes: nothing outlives the
// publication.
func (c *pendingCatalog) Close() error {
	<-c.done
	return c.data.Close()
}
