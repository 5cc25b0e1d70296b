package engine

import (
	"bytes"
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

// readCatalogSummary reads root's catalog as a stream (catalog.Scan) and
// sums it up, holding the sums, not the records; a catalog in another
// form is read whole (readState).
func readCatalogSummary(ctx context.Context, root storage.Backend) (catalogSummary, error) {
	cr := openCatalog(ctx, root)
	defer cr.close()
	if cr.err != nil {
		return catalogSummary{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, cr.err)
	}
	if !cr.found {
		return catalogSummary{}, nil
	}
	var r io.Reader = cr.vr
	if cr.data != nil {
		r = bytes.NewReader(cr.data)
	}
	var agg ownerSums
	head, err := catalog.Scan(r, cr.vr.Size, func(rec *catalog.Record) error {
		agg.add(&rec.Output)
		return nil
	})
	if errors.Is(err, catalog.ErrNotStreamed) {
		return readWholeSummary(ctx, root)
	}
	if err != nil {
		return catalogSummary{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	return agg.summary(head.UpdatedAt), nil
}

// readWholeSummary is readCatalogSummary of a catalog read whole.
func readWholeSummary(ctx context.Context, root storage.Backend) (catalogSummary, error) {
	cs, err := readState(ctx, root)
	if err != nil {
		return catalogSummary{}, err
	}
	if cs.cat == nil {
		return catalogSummary{present: cs.version != "", legacy: cs.legacy}, nil
	}
	var agg ownerSums
	for i := range cs.cat.Outputs {
		agg.add(&cs.cat.Outputs[i])
	}
	return agg.summary(cs.cat.UpdatedAt), nil
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
// a time, holding copies of the owners' and sources' strings only (a
// streamed record's strings last until the next). Neighbouring records
// (path order) mostly share both, so the last ones found are checked
// before the maps: a million records cost a pass, not a million map
// lookups.
type ownerSums struct {
	owners     map[catalog.Owner]*ownerAgg
	lastOwner  *ownerAgg
	lastSource *SourceStatus
	lastKey    sourceKey
}

type ownerAgg struct {
	status  OwnerStatus
	sources map[sourceKey]*SourceStatus
}

func (s *ownerSums) add(o *catalog.Output) {
	if s.owners == nil {
		s.owners = map[catalog.Owner]*ownerAgg{}
	}
	if s.lastOwner == nil || s.lastOwner.status.Owner.PipelineID != o.PipelineID || s.lastOwner.status.Owner.DestinationID != o.DestinationID {
		s.lastOwner = s.owners[o.Owner()]
		if s.lastOwner == nil {
			owner := catalog.Owner{PipelineID: strings.Clone(o.PipelineID), DestinationID: strings.Clone(o.DestinationID)}
			s.lastOwner = &ownerAgg{status: OwnerStatus{Owner: owner}, sources: map[sourceKey]*SourceStatus{}}
			s.owners[owner] = s.lastOwner
		}
		s.lastSource = nil
	}
	key := sourceKey{o.Source.ID, o.Source.Digest, o.Source.Created.UnixNano()}
	if s.lastSource == nil || key != s.lastKey {
		s.lastSource = s.lastOwner.sources[key]
		if s.lastSource == nil {
			src := catalog.Source{ID: strings.Clone(o.Source.ID), Digest: strings.Clone(o.Source.Digest), Created: o.Source.Created}
			key = sourceKey{src.ID, src.Digest, key.created}
			s.lastSource = &SourceStatus{Source: src}
			s.lastOwner.sources[key] = s.lastSource
		}
		s.lastKey = sourceKey{s.lastSource.Source.ID, s.lastSource.Source.Digest, key.created}
	}
	s.lastSource.Outputs++
	s.lastSource.Bytes += o.Size
	if o.UpdatedAt.After(s.lastSource.UpdatedAt) {
		s.lastSource.UpdatedAt = o.UpdatedAt
	}
	s.lastOwner.status.Outputs++
	s.lastOwner.status.Bytes += o.Size
}

// summary is the catalog's summary: updatedAt and the sums.
func (s *ownerSums) summary(updatedAt time.Time) catalogSummary {
	sum := catalogSummary{present: true, updatedAt: updatedAt, owners: s.ownerList()}
	for _, o := range sum.owners {
		sum.outputs += o.Outputs
		sum.bytes += o.Bytes
	}
	return sum
}

// ownerList is the sums per owner, in owner order, each owner's sources
// newest first.
func (s *ownerSums) ownerList() []OwnerStatus {
	out := make([]OwnerStatus, 0, len(s.owners))
	for _, a := range s.owners {
		for _, s := range a.sources {
			a.status.Sources = append(a.status.Sources, *s)
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
