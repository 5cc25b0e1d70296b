package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// RootStatus is what a root holds, read without a lease and changing
// nothing (`distributor status`): its catalog, read once and summed up per
// owner and source version, whether an interrupted run awaits recovery,
// the leftovers of interrupted writes, and the lock object.
type RootStatus struct {
	Root string

	// Catalog: the root has a catalog; Legacy: it is superseded legacy
	// state (no owners until the next publication writes v4).
	Catalog, Legacy bool

	// UpdatedAt is the catalog's updated_at.
	UpdatedAt time.Time
	Outputs   int
	Bytes     int64

	// Owners are the owners of the root's records, by pipeline, then
	// destination.
	Owners          []OwnerStatus
	PendingRecovery bool

	// Leftovers of interrupted writes; not looked for when the status was
	// asked without them.
	Leftovers *LeftoverReport

	// Lock is the lock object's holder, when there is one.
	Lock *lease.Holding

	// Retired are the paths kept for readers of a previous version
	// (retain_previous) and when the last of them is due for removal.
	Retired RetiredStatus
}

// OwnerStatus is what one owner has in a root.
type OwnerStatus struct {
	Owner   catalog.Owner
	Outputs int
	Bytes   int64

	// Sources are the source versions its records come from, newest
	// (created) first: one after a replacement publication, several side
	// by side in an additive root.
	Sources []SourceStatus
}

// SourceStatus is what one source version contributes to an owner.
type SourceStatus struct {
	Source  catalog.Source
	Outputs int
	Bytes   int64

	// UpdatedAt is the latest updated_at of its records.
	UpdatedAt time.Time
}

// StatusOptions say what Status looks at beyond the catalog.
type StatusOptions struct {
	// Leftovers walks the root for leftovers of interrupted writes (on a
	// local root, a walk of every folder).
	Leftovers bool

	// Catalogs, when set, keeps each root's catalog summed up with the
	// version it was read at: a status of a root whose catalog did not
	// change reads no catalog.
	Catalogs *CatalogSummaries
}

// Status reads root's state once: no lease, no recovery, no write, so it
// works on read-only roots and while publications run.
func (e *Engine) Status(ctx context.Context, root storage.Backend, opts StatusOptions) (RootStatus, error) {
	st := RootStatus{Root: root.String()}
	intent, _, err := readIntent(ctx, root)
	if err != nil {
		return st, fmt.Errorf("read intent in %s: %w", root, err)
	}
	st.PendingRecovery = intent != nil
	if st.Retired, err = retiredStatus(ctx, root); err != nil {
		return st, err
	}
	st.Lock, err = lease.ReadLock(ctx, root, time.Now())
	if err != nil {
		return st, err
	}
	if opts.Leftovers {
		lo, err := e.statusLeftovers(ctx, root)
		if err != nil {
			return st, err
		}
		st.Leftovers = &lo
	}
	sum, err := opts.Catalogs.read(ctx, root, e.now())
	if err != nil {
		return st, err
	}
	st.Catalog, st.Legacy, st.UpdatedAt = sum.present, sum.legacy, sum.updatedAt
	st.Owners, st.Outputs, st.Bytes = sum.owners, sum.outputs, sum.bytes
	return st, nil
}

// catalogSummary is what Status tells of a root's catalog.
type catalogSummary struct {
	present, legacy bool
	updatedAt       time.Time
	owners          []OwnerStatus
	outputs         int
	bytes           int64
}

// readCatalogSummary reads root's catalog record by record and sums it
// up: it holds the owners and their source versions, never the records.
func readCatalogSummary(ctx context.Context, root storage.Backend) (catalogSummary, error) {
	var sum ownerSums
	head, err := streamCatalog(ctx, root, func(r io.Reader) (catalog.Head, error) {
		return catalog.ScanTally(r, func(t *catalog.Tally) error {
			sum.add(t)
			return nil
		})
	}, func(outs []catalog.Output) {
		sum = ownerSums{}
		for _, o := range outs {
			sum.add(&catalog.Tally{Owner: o.Owner(), Source: o.Source, Size: o.Size, UpdatedAt: o.UpdatedAt})
		}
	})
	if err != nil {
		return catalogSummary{}, err
	}
	cs := catalogSummary{present: head.present, legacy: head.legacy, updatedAt: head.updatedAt}
	if !head.present || head.legacy {
		return cs, nil
	}
	cs.owners = sum.owners()
	for _, o := range cs.owners {
		cs.outputs += o.Outputs
		cs.bytes += o.Bytes
	}
	return cs, nil
}

// CatalogSummaries keeps the summary of each root's catalog (owners,
// source versions, counts; never the records) with the catalog's
// fingerprint (storage.ObjectInfo.Fingerprint: the ETag, or a local
// file's identity, size and modification time) taken before the read. A
// status stats the catalog and reads it again only when the fingerprint
// changed: a catalog replaced between the stat and the read is kept under
// the older fingerprint, so the next status reads it again. A catalog
// changed within catalogSettle is not kept, since a local file's
// modification time may not tell two writes within one clock tick apart.
// Safe for concurrent use.
type CatalogSummaries struct {
	mu    sync.Mutex
	roots map[string]cachedSummary
}

type cachedSummary struct {
	fingerprint string
	sum         catalogSummary
}

// catalogSettle is how long ago a catalog must have changed to be kept.
const catalogSettle = 2 * time.Second

// read returns root's catalog summary, from c when its catalog did not
// change since; a nil c reads it every time. now is the clock's time.
func (c *CatalogSummaries) read(ctx context.Context, root storage.Backend, now time.Time) (catalogSummary, error) {
	if c == nil {
		return readCatalogSummary(ctx, root)
	}
	key := root.String()
	fi, err := root.Stat(ctx, catalog.FileName)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		fi = storage.ObjectInfo{}
	case err != nil:
		return catalogSummary{}, fmt.Errorf("stat %s in %s: %w", catalog.FileName, root, err)
	}
	c.mu.Lock()
	cached, ok := c.roots[key]
	c.mu.Unlock()
	if ok && fi.Fingerprint != "" && cached.fingerprint == fi.Fingerprint {
		return cached.sum, nil
	}
	sum, err := readCatalogSummary(ctx, root)
	if err != nil {
		return sum, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fi.Fingerprint != "" && fi.ModTime.Before(now.Add(-catalogSettle)) {
		if c.roots == nil {
			c.roots = map[string]cachedSummary{}
		}
		c.roots[key] = cachedSummary{fingerprint: fi.Fingerprint, sum: sum}
	} else {
		delete(c.roots, key)
	}
	return sum, nil
}

// sourceKey identifies a source version in a map (time.Time is no key).
type sourceKey struct {
	id, digest string
	created    int64
}

// ownerSums sums records up per owner and source version, one record at
// a time. Neighbouring records (path order) mostly share both, so the last
// ones found are checked before the maps: a million records cost a pass,
// not a million map lookups. A record's strings may point into a scan's
// buffer: what is kept of them is copied.
type ownerSums struct {
	byOwner    map[catalog.Owner]*ownerSum
	lastOwner  *ownerSum
	lastSource *SourceStatus
	lastKey    sourceKey
}

type ownerSum struct {
	status  OwnerStatus
	sources map[sourceKey]*SourceStatus
}

// add counts one record.
func (s *ownerSums) add(t *catalog.Tally) {
	if s.lastOwner == nil || s.lastOwner.status.Owner != t.Owner {
		s.lastOwner = s.byOwner[t.Owner]
		if s.lastOwner == nil {
			owner := catalog.Owner{PipelineID: strings.Clone(t.Owner.PipelineID), DestinationID: strings.Clone(t.Owner.DestinationID)}
			s.lastOwner = &ownerSum{status: OwnerStatus{Owner: owner}, sources: map[sourceKey]*SourceStatus{}}
			if s.byOwner == nil {
				s.byOwner = map[catalog.Owner]*ownerSum{}
			}
			s.byOwner[owner] = s.lastOwner
		}
		s.lastSource = nil
	}
	key := sourceKey{t.Source.ID, t.Source.Digest, t.Source.Created.UnixNano()}
	if s.lastSource == nil || key != s.lastKey {
		s.lastSource = s.lastOwner.sources[key]
		if s.lastSource == nil {
			src := catalog.Source{ID: strings.Clone(t.Source.ID), Digest: strings.Clone(t.Source.Digest), Created: t.Source.Created}
			s.lastSource = &SourceStatus{Source: src}
			s.lastOwner.sources[sourceKey{src.ID, src.Digest, key.created}] = s.lastSource
		}
		// The key kept holds the copies: the scan's buffer changes.
		s.lastKey = sourceKey{s.lastSource.Source.ID, s.lastSource.Source.Digest, key.created}
	}
	s.lastSource.Outputs++
	s.lastSource.Bytes += t.Size
	if t.UpdatedAt.After(s.lastSource.UpdatedAt) {
		s.lastSource.UpdatedAt = t.UpdatedAt
	}
	s.lastOwner.status.Outputs++
	s.lastOwner.status.Bytes += t.Size
}

// owners returns the sums by pipeline, then destination, each owner's
// source versions newest (created) first.
func (s *ownerSums) owners() []OwnerStatus {
	out := make([]OwnerStatus, 0, len(s.byOwner))
	for _, a := range s.byOwner {
		for _, src := range a.sources {
			a.status.Sources = append(a.status.Sources, *src)
		}
		sort.Slice(a.status.Sources, func(i, j int) bool {
			x, y := a.status.Sources[i].Source, a.status.Sources[j].Source
			if !x.Created.Equal(y.Created) {
				return x.Created.After(y.Created)
			}
			if x.ID != y.ID {
				return x.ID < y.ID
			}
			return x.Digest > y.Digest
		})
		out = append(out, a.status)
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i].Owner, out[j].Owner
		if x.PipelineID != y.PipelineID {
			return x.PipelineID < y.PipelineID
		}
		return x.DestinationID < y.DestinationID
	})
	return out
}
