package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// publication is one run of Publish as it moves through its steps: plan,
// report what earlier attempts did, check and stage the bundle, write the
// intent, make room, write, sync, delete, commit. Each step narrows what
// a crash can leave; the package documentation says why each is safe.
type publication struct {
	e    *Engine
	root storage.Backend
	l    lease.Lease
	pub  Publication
	pl   planned
	res  Result

	// seen and carried are the paths earlier attempts of this event wrote
	// that this run reports without writing them again.
	seen    map[string]bool
	carried []string

	// intent is the intent this run wrote (putIntent), for dropIntent.
	intent writtenIntent

	// spent is the pending report to remove once this run succeeds.
	spent     string
	writes    []planner.Item
	deletes   []string
	displaced []string
	content   map[string][]byte
	stg       *staged

	// cat is the next catalog, prepared while the outputs are written,
	// and confirmed the lease's confirmation for its commit (confirming).
	cat       storage.PendingCatalog
	confirmed func() error

	// catalog is the catalog opened while the intent was read (see run),
	// or after a recovery: the plan's read.
	catalog func() catalogRead
}

func (e *Engine) run(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, spent *string) (Result, error) {
	r := &publication{e: e, root: root, l: l, pub: pub, res: Result{Root: root.String()}, seen: map[string]bool{}}
	err := r.run(ctx)
	*spent = r.spent
	return r.res, err
}

func (r *publication) run(ctx context.Context) error {
	// The catalog is read beside the intent (or before the run, when the
	// caller read ahead): the plan's read unless a recovery changed it.
	early := r.pub.ReadAhead.reading()
	if early == nil {
		early = r.readCatalog(ctx)
	} else {
		defer r.pub.ReadAhead.cancel() // taken over: its reads end with the run
	}
	defer func() { early().close() }() // nothing outlives the run
	pending, err := r.recoverFirst(ctx)
	if err != nil {
		return err
	}
	r.catalog = early
	if r.res.Recovered {
		again := openCatalog(ctx, r.root, r.e.wholeCatalog())
		defer again.close()
		r.catalog = func() catalogRead { return again }
	}
	if pending.Result != nil {
		// An earlier attempt finished; only its result is left to deliver.
		r.res.Kept = pending.Result
		return nil
	}
	if err := r.plan(ctx); err != nil {
		r.spendIfSuperseded(err, pending)
		return err
	}
	r.carry(pending)
	p := r.pl.Plan
	if !p.Changed {
		// "Unchanged" must describe the configured root, not a folder moved
		// away since it was opened.
		if err := r.root.CheckRoot(ctx); err != nil {
			return err
		}
		r.e.saveFingerprints(ctx, r.root, r.l, r.pl.fps, r.pl.st.recordedAfter(r.pl.st.cat))
		r.sweepAfterCommit(ctx, r.pl.st.recordedAfter(r.pl.st.cat))
		return nil
	}
	r.writes, r.deletes = p.Writes(), p.Deletes()

	// Managed outputs in the way of a write (a file where a folder goes,
	// or files under a planned file) are deleted before the writes.
	r.displaced = p.Displaced()
	defer r.closeStage()
	defer r.closeCatalog()
	defer r.awaitConfirmed() // nothing outlives the run
	if err := r.prepare(ctx); err != nil {
		return err
	}
	if err := r.writeIntent(ctx); err != nil {
		return err
	}
	if err := r.makeRoom(ctx); err != nil {
		return err
	}
	if err := r.write(ctx); err != nil {
		return err
	}
	return r.finish(ctx)
}

// readCatalog opens the root's catalog in the background; the result
// waits for it (and may be called again).
func (r *publication) readCatalog(ctx context.Context) func() catalogRead {
	read := make(chan catalogRead, 1)
	go func() { read <- openCatalog(ctx, r.root, r.e.wholeCatalog()) }()
	return sync.OnceValue(func() catalogRead { return <-read })
}

// recoverFirst rolls an interrupted run forward, if any, and returns the
// pending report of the paths earlier attempts of this same publication
// changed (see Pending reports in the package doc): whichever attempt
// finishes reports them. The report is read beside the intent, not after
// it: a recovery, which may change the report, is rare, and then it is
// read again.
func (r *publication) recoverFirst(ctx context.Context) (pendingReport, error) {
	type report struct {
		r   pendingReport
		err error
	}
	reported := make(chan report, 1)
	go func() {
		p, err := readReport(ctx, r.root, r.pub.BundleEventID, r.pub.Owner)
		reported <- report{p, err}
	}()

	// An intent emptied in place (dropIntent) is none.
	data, v, err := readIntent(ctx, r.root)
	rec, err := r.e.recoverFrom(ctx, r.root, r.l, true, data, v, err)
	got := <-reported
	if err != nil {
		return pendingReport{}, err
	}
	r.res.Recovered = rec.found
	if rec.found {
		return readReport(ctx, r.root, r.pub.BundleEventID, r.pub.Owner)
	}
	return got.r, got.err
}

// plan plans the publication and refuses a superseded or blocked one.
func (r *publication) plan(ctx context.Context) error {
	var err error
	r.pl, err = r.e.plan(ctx, r.root, r.pub, r.catalog)
	p := r.pl.Plan
	r.res.Plan = p
	if err != nil {
		return err
	}
	if p.Superseded != nil {
		return &SupersededError{Root: r.root.String(), Owner: r.pub.Owner, Source: r.pub.Source, By: *p.Superseded}
	}
	if p.Blocked() {
		return collisionError(r.root, p)
	}
	r.res.Unchanged = p.Count(planner.Unchanged)
	r.res.KeptNewer = p.Count(planner.KeptNewer)
	return nil
}

// carry reports what earlier attempts of this event wrote, with the record
// this run leaves (not the earlier attempt's, which this plan may have
// updated), once, and only while it is still planned.
func (r *publication) carry(pending pendingReport) {
	for _, path := range pending.Written {
		it, ok := itemAt(r.pl.Items, path)
		if r.seen[path] || !ok || it.Desired == nil || it.Write || it.Action == planner.KeptNewer {
			continue // this attempt writes it (reported then), it left the plan, or a newer version overwrote it since
		}
		r.seen[path] = true
		r.carried = append(r.carried, path)
		r.res.Written = append(r.res.Written, planner.Item{Path: path, Action: it.Action, Write: true, Desired: it.Desired, Record: it.Record})
		if it.Action == planner.Unchanged {
			r.res.Unchanged--
		}
	}
	r.res.Deleted = append(r.res.Deleted, pending.Deleted...)
	if len(pending.Written)+len(pending.Deleted) > 0 {
		r.spent = reportPath(r.pub.BundleEventID, r.pub.Owner)
	}
}

// spendIfSuperseded spends the pending report of a superseded version:
// its result is the event's last, and what its earlier attempts wrote
// belongs to the newer version now, so no attempt would ever claim it.
func (r *publication) spendIfSuperseded(err error, pending pendingReport) {
	var superseded *SupersededError
	if errors.As(err, &superseded) && len(pending.Written)+len(pending.Deleted) > 0 {
		r.spent = reportPath(r.pub.BundleEventID, r.pub.Owner)
	}
}

// writeIntent records what this run is about to change, so that a crash
// from here on is rolled forward by the next run.
func (r *publication) writeIntent(ctx context.Context) error {
	if len(r.writes)+len(r.deletes) == 0 {
		return nil
	}
	records := make([]catalog.Output, 0, len(r.writes))
	for _, it := range r.writes {
		records = append(records, it.Record)
	}
	var err error
	r.intent, err = putIntent(ctx, r.root, r.l, intentDoc{EventID: r.pub.BundleEventID, Owner: r.pub.Owner,
		Writes: records, Deletes: r.deletes, Reported: r.carried, Source: r.pub.Source, AllowOlder: r.pub.AllowOlder})
	return err
}

// makeRoom deletes the managed outputs in the way of a write; the intent
// already lists them, so a crash from here on converges like any other.
func (r *publication) makeRoom(ctx context.Context) error {
	if len(r.displaced) == 0 {
		return nil
	}
	if err := r.l.Err(); err != nil {
		return err
	}
	if err := r.root.Delete(ctx, r.displaced...); err != nil {
		// Some may be gone: drop their records like after a failed write.
		return r.rollForward(ctx, "delete", fmt.Errorf("delete in %s: %w", r.root, err))
	}
	r.res.Deleted = append(r.res.Deleted, r.displaced...)
	return nil
}

// finish makes the writes durable, deletes what the plan drops, commits the
// catalog and removes the intent.
func (r *publication) finish(ctx context.Context) error {
	p := r.pl.Plan
	later := without(r.deletes, r.displaced)

	// The index's shards are written beside the barrier and the commit:
	// facts about the versions written, true whether the commit wins or
	// not (a failed one costs the next publication hashes, no more).
	saved := r.saveFingerprints(ctx, r.pl.st.recordedAfter(p.Next))
	defer saved()

	// Outputs are written with DeferSync: one flush makes them all durable
	// before the catalog that records them is committed, with an earlier
	// run's intent removal (dropIntent defers it). The backend flushes
	// only what changed: a republish that only updates records costs the
	// flush of the emptied intent, not of the file system.
	if err := r.root.Sync(ctx); err != nil {
		return fmt.Errorf("sync %s: %w", r.root, err)
	}
	if len(later) > 0 {
		if err := r.l.Err(); err != nil {
			return err
		}
		if err := r.deleteOrRetire(ctx, later); err != nil {
			return err
		}
		r.res.Deleted = append(r.res.Deleted, later...)
	}
	r.reportUpdated()
	if err := commitPending(ctx, r.root, r.l, r.confirmed, r.cat, r.pl.st.version); err != nil {
		return err
	}
	r.sweepAfterCommit(ctx, r.pl.st.recordedAfter(p.Next))

	// The index's writes, too, are done before the intent goes.
	saved()
	r.settle(ctx)
	return nil
}

// deleteOrRetire deletes the paths the plan drops, once every write is
// visible, or, where the publication retains them, records them retired.
func (r *publication) deleteOrRetire(ctx context.Context, paths []string) error {
	if r.retains() {
		return r.retire(ctx, paths)
	}
	if err := r.root.Delete(ctx, paths...); err != nil {
		return fmt.Errorf("delete in %s: %w", r.root, err)
	}
	return nil
}

// reportUpdated adds the records updated without a byte write to the
// result. Items are large and a republish may update every record:
// counted first, the report is one allocation instead of a doubling
// series, and none when the updated items are one run of the plan's (a
// republish of unchanged bytes): the report is that run.
func (r *publication) reportUpdated() {
	items := r.pl.Plan.Items
	updated := func(it *planner.Item) bool {
		return it.Action == planner.Update && !it.Write && !r.seen[it.Path] // carried ones are reported as written
	}
	n, first, last := 0, -1, -1
	for i := range items {
		if updated(&items[i]) {
			n++
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if n > 0 && n == last-first+1 && len(r.res.Updated) == 0 {
		r.res.Updated = items[first : last+1 : last+1]
		return
	}
	r.res.Updated = slices.Grow(r.res.Updated, n)
	for i := range items {
		if updated(&items[i]) {
			r.res.Updated = append(r.res.Updated, items[i])
		}
	}
}

// saveFingerprints rewrites the fingerprint index in the background,
// beside the barrier and the commit (its CPU beside their waits); the
// caller must call the result, which waits for it (and may be called
// again).
func (r *publication) saveFingerprints(ctx context.Context, next recorded) (wait func()) {
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		r.e.saveFingerprints(ctx, r.root, r.l, r.pl.fps, next)
	}()
	return func() { <-saved }
}

// settle ends a committed publication: once the stage is closed (which
// may finish work its commits began: a local stage removes the files its
// replacements swapped out), the intent goes; a crash until then leaves
// those files (temp names) under the intent, removed as leftovers once
// older than LeftoverAge.
func (r *publication) settle(ctx context.Context) {
	r.closeStage()
	r.closeCatalog()
	if len(r.writes)+len(r.deletes) > 0 {
		r.e.dropIntent(ctx, r.root, r.l, r.intent)
	}
}

// rollForward records what landed before a step (op) failed with failed,
// keeping the intent for the retry of this event, and returns the error
// the run ends with. A failed write is often how a holder paused past its
// lease first meets a newer holder's work (a lost condition), so the lease
// is confirmed with its store: when it is lost, that is the run's error.
func (r *publication) rollForward(ctx context.Context, op string, failed error) error {
	ctx = context.WithoutCancel(ctx)
	_, err := r.e.recover(ctx, r.root, r.l, false)
	if err != nil && !errors.Is(err, lease.ErrLost) {
		r.e.Log.Warn().Err(err).Str("root", r.root.String()).Msgf("recovery after failed %s did not finish; the next run completes it", op)
	}
	if errors.Is(failed, lease.ErrLost) {
		return failed
	}
	if !errors.Is(err, lease.ErrLost) {
		err = r.l.Confirm(ctx) // a failure to answer leaves failed as the error
	}
	if errors.Is(err, lease.ErrLost) {
		return fmt.Errorf("%w; the %s that failed: %v", err, op, failed)
	}
	return failed
}

func (r *publication) awaitConfirmed() {
	if r.confirmed != nil {
		_ = r.confirmed()
	}
}

func (r *publication) closeCatalog() {
	if r.cat != nil {
		r.cat.Close()
		r.cat = nil
	}
}
