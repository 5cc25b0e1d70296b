package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// recovery is what recover found and rolled forward.
type recovery struct {
	found   bool
	eventID string        // the interrupted run's bundle event
	owner   catalog.Owner // and the owner it published for

	// landed are the paths whose intended bytes are in storage (rolled
	// forward now or by an earlier recovery); reported are the paths
	// earlier attempts carried forward; deleted were dropped because their
	// bytes were gone.
	landed, reported, deleted []string
}

// recover is Recover. For an earlier run's leftovers (earlier) it logs at
// info level and removes the intent; after this run's own failed writes it
// logs at debug level and keeps the intent, so that the retry of the same
// event can report what landed.
func (e *Engine) recover(ctx context.Context, root storage.Backend, l lease.Lease, earlier bool) (recovery, error) {
	data, v, err := readIntent(ctx, root)
	return e.recoverFrom(ctx, root, l, earlier, data, v, err)
}

// recoverFrom is recover of the intent already read (data, v, err: what
// readIntent returned).
func (e *Engine) recoverFrom(ctx context.Context, root storage.Backend, l lease.Lease, earlier bool, data []byte, v storage.Version, err error) (recovery, error) {
	if err != nil {
		return recovery{}, fmt.Errorf("read intent in %s: %w", root, err)
	}
	if data == nil {
		return recovery{}, nil
	}
	doc, err := decodeIntent(data)
	if errors.Is(err, errTornIntent) && root.Properties().TornInPlace {
		// A crash in the middle of its rewrite, before its flush returned:
		// no output of it was named yet, and the intent it replaced was
		// committed and emptied first. Nothing to roll forward; emptied
		// (without a flush: a torn copy that comes back is ignored again),
		// or verify would report it pending after runs that write no
		// intent of their own.
		e.Log.Warn().Str("root", root.String()).Msg("ignored an intent torn by a crash while it was written; nothing of it had been applied")
		if err := l.Err(); err != nil {
			return recovery{}, err
		}
		if err := clearIntent(ctx, root, v); err != nil {
			return recovery{}, fmt.Errorf("remove torn intent in %s: %w", root, err)
		}
		return recovery{}, nil
	}
	if err != nil {
		return recovery{}, fmt.Errorf("%s: %w", root, err)
	}
	out := recovery{found: true, eventID: doc.EventID, owner: doc.Owner, reported: doc.Reported}
	if err := e.rollIntentForward(ctx, root, l, doc, &out); err != nil {
		return recovery{}, err
	}
	if !earlier {
		e.Log.Debug().Str("root", root.String()).Int("landed", len(out.landed)).Msg("recorded the writes that landed before the failure")
		return out, nil
	}
	if err := e.closeIntent(ctx, root, l, doc, v, out); err != nil {
		return recovery{}, err
	}
	e.Log.Info().Str("root", root.String()).Int("intended_writes", len(doc.Writes)).Int("intended_deletes", len(doc.Deletes)).Msg("recovered an interrupted publication")
	return out, nil
}

// rollIntentForward commits a catalog that records the intended writes
// whose bytes landed and drops the records of intended deletes that are
// gone. A legacy catalog is left as it is.
func (e *Engine) rollIntentForward(ctx context.Context, root storage.Backend, l lease.Lease, doc intentDoc, out *recovery) error {
	// Of a large catalog, the records at the paths the intent names.
	named := make(map[string]bool, len(doc.Writes)+len(doc.Deletes))
	for _, rec := range doc.Writes {
		named[rec.Path] = true
	}
	for _, p := range doc.Deletes {
		named[p] = true
	}
	st, done, err := e.readSelected(ctx, root, recordRule{match: func(o *catalog.Output) bool { return named[o.Path] }, hint: len(named)})
	if err != nil {
		return err
	}
	defer done()
	if st.legacy {
		return nil
	}
	cur := st.cat
	if cur == nil {
		cur = &catalog.Catalog{}
	}
	index := cur.Index()
	changed := false
	for _, rec := range doc.Writes {
		ok, err := landed(ctx, root, rec)
		if err != nil {
			return fmt.Errorf("recover %s in %s: %w", rec.Path, root, err)
		}
		old, managed := index[rec.Path]
		if !ok || managed && supersedes(old, doc, rec.Source) {
			continue
		}
		out.landed = append(out.landed, rec.Path)
		if managed && old.SameContent(rec) {
			continue // recorded by an earlier recovery
		} else if managed {
			rec.CreatedAt = old.CreatedAt
		}
		index[rec.Path] = rec
		changed = true
	}
	for _, p := range doc.Deletes {
		// Every intended delete was managed when planned; one that is
		// neither stored nor recorded now was deleted by this run and
		// dropped by its own recovery after a failed write (displaced
		// deletes run before the writes): still reported. One below a
		// symlink (planted after the plan) is gone from the root too.
		if _, err := root.Stat(ctx, p); errors.Is(err, storage.ErrNotExist) || errors.Is(err, storage.ErrSymlink) {
			if old, managed := index[p]; managed && !supersedes(old, doc, doc.Source) {
				delete(index, p)
				changed = true
			}
			out.deleted = append(out.deleted, p)
		} else if err != nil {
			return fmt.Errorf("recover %s in %s: %w", p, root, err)
		}
	}
	if !changed {
		return nil
	}
	next := &catalog.Catalog{DistributorVersion: cur.DistributorVersion, CreatedAt: cur.CreatedAt, UpdatedAt: cur.UpdatedAt}
	for _, o := range index {
		next.Outputs = append(next.Outputs, o)
	}
	now := e.now()
	if st.cat == nil {
		next.CreatedAt = now
	}
	next.UpdatedAt = now
	if e.Version != "" {
		next.DistributorVersion = e.Version
	}
	if err := root.Sync(ctx); err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	return e.commit(ctx, root, l, st, next)
}

// supersedes reports whether the record old is of a newer version of the
// source v that doc's run publishes, for the same owner: committed by a
// newer holder after doc was written (its run lost its lease meanwhile).
// Such a record stays whatever that run's writes or deletes left in
// storage: bytes equal to the newer version's are the newer holder's own,
// and other ones are damage that verify reports and the next publication
// repairs. A roll back (AllowOlder) replaces newer versions by design.
func supersedes(old catalog.Output, doc intentDoc, v catalog.Source) bool {
	return !doc.AllowOlder && v.ID != "" && old.PipelineID == doc.Owner.PipelineID && old.DestinationID == doc.Owner.DestinationID &&
		old.Source.ID == v.ID && planner.Newer(old.Source, v)
}

// closeIntent ends an earlier run's intent (version v): what it changed is kept for the
// report of its event's retry, the intent is removed and the leftovers of
// its interrupted writes go too.
func (e *Engine) closeIntent(ctx context.Context, root storage.Backend, l lease.Lease, doc intentDoc, v storage.Version, out recovery) error {
	if err := l.Err(); err != nil {
		return err
	}
	if err := e.keepReport(ctx, root, doc.EventID, doc.Owner, append(out.landed, doc.Reported...), out.deleted); err != nil {
		return err
	}
	if err := clearIntent(ctx, root, v); err != nil {
		return fmt.Errorf("remove intent in %s: %w", root, err)
	}
	if err := root.Sync(ctx); err != nil {
		return fmt.Errorf("remove intent in %s: %w", root, err)
	}

	// Only space is at stake, so a failure does not stop the publication.
	if _, err := e.CleanLeftovers(ctx, root, l); err != nil {
		e.Log.Warn().Err(err).Str("root", root.String()).Msg("could not remove the leftovers of interrupted writes; reconcile-state removes them")
	}
	return nil
}
