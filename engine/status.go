package engine

import (
	"context"
	"fmt"
	"sort"
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
}

// Status reads root's state once: no lease, no recovery, no write, so it
// works on read-only roots and while publications run.
func (e *Engine) Status(ctx context.Context, root storage.Backend, opts StatusOptions) (RootStatus, error) {
	st := RootStatus{Root: root.String()}
	intent, _, err := root.ReadIntent(ctx)
	if err != nil {
		return st, fmt.Errorf("read intent in %s: %w", root, err)
	}
	st.PendingRecovery = intent != nil
	st.Lock, err = lease.ReadLock(ctx, root, time.Now())
	if err != nil {
		return st, err
	}
	if opts.Leftovers {
		lo, err := e.Leftovers(ctx, root)
		if err != nil {
			return st, err
		}
		st.Leftovers = &lo
	}
	cs, err := readState(ctx, root)
	if err != nil {
		return st, err
	}
	st.Catalog, st.Legacy = cs.version != "", cs.legacy
	if cs.cat == nil {
		return st, nil
	}
	st.UpdatedAt = cs.cat.UpdatedAt
	st.Owners = summarizeOwners(cs.cat.Outputs)
	for _, o := range st.Owners {
		st.Outputs += o.Outputs
		st.Bytes += o.Bytes
	}
	return st, nil
}

// sourceKey identifies a source version in a map (time.Time is no key).
type sourceKey struct {
	id, digest string
	created    int64
}

// summarizeOwners sums outputs up per owner and source version in one pass.
// Neighbouring records (path order) mostly share both, so the last ones
// found are checked before the maps: a million records cost a pass, not a
// million map lookups.
func summarizeOwners(outs []catalog.Output) []OwnerStatus {
	type ownerAgg struct {
		status  OwnerStatus
		sources map[sourceKey]*SourceStatus
	}
	owners := map[catalog.Owner]*ownerAgg{}
	var lastOwner *ownerAgg
	var lastSource *SourceStatus
	var lastKey sourceKey
	for i := range outs {
		o := &outs[i]
		if lastOwner == nil || lastOwner.status.Owner.PipelineID != o.PipelineID || lastOwner.status.Owner.DestinationID != o.DestinationID {
			lastOwner = owners[o.Owner()]
			if lastOwner == nil {
				lastOwner = &ownerAgg{status: OwnerStatus{Owner: o.Owner()}, sources: map[sourceKey]*SourceStatus{}}
				owners[o.Owner()] = lastOwner
			}
			lastSource = nil
		}
		key := sourceKey{o.Source.ID, o.Source.Digest, o.Source.Created.UnixNano()}
		if lastSource == nil || key != lastKey {
			lastSource = lastOwner.sources[key]
			if lastSource == nil {
				lastSource = &SourceStatus{Source: o.Source}
				lastOwner.sources[key] = lastSource
			}
			lastKey = key
		}
		lastSource.Outputs++
		lastSource.Bytes += o.Size
		if o.UpdatedAt.After(lastSource.UpdatedAt) {
			lastSource.UpdatedAt = o.UpdatedAt
		}
		lastOwner.status.Outputs++
		lastOwner.status.Bytes += o.Size
	}
	out := make([]OwnerStatus, 0, len(owners))
	for _, a := range owners {
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
