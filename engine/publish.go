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

	// open, when set, completes pub: its bundle is still being opened
	// (Engine.PublishOpening). Nil once waited for.
	open func() (Publication, error)

	// catalog, when set, is the catalog read while the intent was (see
	// run): the plan's read.
	catalog func() catalogRead
}

func (e *Engine) run(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, open func() (Publication, error), spent *string) (Result, error) {
	r := &publication{e: e, root: root, l: l, pub: pub, res: Result{Root: root.String()}, seen: map[string]bool{}, open: open}
	err := r.run(ctx)
	*spent = r.spent
	return r.res, err
}

// awaitBundle waits for the bundle still being opened, if any.
func (r *publication) awaitBundle() error {
	if r.open == nil {
		return nil
	}
	pub, err := r.open()
	r.open = nil
	if err != nil {
		return err
	}
	r.pub = pub
	return nil
}

func (r *publication) run(ctx context.Context) error {
	// Paths earlier attempts of this same publication changed (see
	// Pending reports in the package doc): whichever attempt finishes
	// reports them. Read beside the intent, not after it: a recovery,
	// which may change the report, is rare, and then it is read again.
	type report struct {
		r   pendingReport
		err error
	}
	reported := make(chan report, 1)
	eventID, owner := r.pub.BundleEventID, r.pub.Owner // awaitBundle replaces r.pub meanwhile
	go func() {
		p, err := readReport(ctx, r.root, eventID, owner)
		reported <- report{p, err}
	}()

	// So is the catalog, which the plan reads unless a recovery changed it.
	read := make(chan catalogRead, 1)
	go func() {
		data, v, err := r.root.ReadVersion(ctx, catalog.FileName)
		read <- catalogRead{data, v, err}
	}()
	early := sync.OnceValue(func() catalogRead { return <-read })
	defer early() // nothing outlives the run

	// An intent emptied in place (dropIntent) is none.
	data, v, err := readIntent(ctx, r.root)

	// A bundle that turns out unusable changes nothing: an interrupted
	// run's recovery (a write) waits until the bundle is known good.
	if r.open != nil && (err != nil || data != nil) {
		if err := r.awaitBundle(); err != nil {
			<-reported
			return err
		}
	}
	rec, err := r.e.recoverFrom(ctx, r.root, r.l, true, data, v, err)
	got := <-reported
	if err != nil {
		return err
	}
	r.res.Recovered = rec.found
	pending, err := got.r, got.err
	if rec.found {
		pending, err = readReport(ctx, r.root, r.pub.BundleEventID, r.pub.Owner)
	} else {
		r.catalog = early
	}
	if err != nil {
		return err
	}
	if pending.Result != nil {
		// An earlier attempt finished; only its result is left to deliver.
		r.res.Kept = pending.Result
		return nil
	}
	if err := r.plan(ctx); err != nil {
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
		r.e.saveFingerprints(ctx, r.root, r.l, r.pl.fps, r.pl.st.cat)
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

// plan plans the publication and refuses a superseded or blocked one.
func (r *publication) plan(ctx context.Context) error {
	var err error
	r.pl, err = r.e.plan(ctx, r.root, &r.pub, r.awaitBundle, r.catalog)
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

// prepare checks the bundle files this plan copies, stages the writes when
// the backend can, and loads the fingerprint shards the writes rewrite.
func (r *publication) prepare(ctx context.Context) error {
	r.content = make(map[string][]byte)
	for _, o := range r.pub.Outputs {
		if o.Content != nil {
			r.content[o.Path] = o.Content
		}
	}
	var copies []string
	for _, it := range r.writes {
		if _, ok := r.content[it.Path]; !ok {
			copies = append(copies, it.Desired.From)
		}
	}

	// Every output is written invisibly first, the bundle's bytes hashed
	// as they pass, and named only once all are complete: each bundle
	// byte is read once. Not when deletes must first make room for the
	// writes' folders.
	staging := len(r.displaced) == 0 && len(r.writes) > 0
	if err := r.checkCopies(ctx, copies, staging); err != nil {
		return err
	}
	if staging {
		r.stg = &staged{Stage: r.root.Stage(ctx)}
		if err := r.e.stageAll(ctx, r.root, r.stg, r.pub, r.writes, r.content, r.pl.stored); err != nil {
			// The sizes were not checked up front (see checkCopies): a
			// missing or resized bundle file is reported as that check
			// reports it, all of them at once, before any other failure.
			if len(copies) > 0 {
				if serr := r.pub.Bundle.CheckSizes(ctx, copies); serr != nil {
					return serr
				}
			}
			return err
		}
	}

	// The index shards of the paths about to be written are rewritten
	// afterwards: load their other entries first.
	writePaths := make([]string, len(r.writes))
	for i, it := range r.writes {
		writePaths[i] = it.Path
	}
	if err := r.e.loadFingerprints(ctx, r.root, r.pl.fps, writePaths); err != nil {
		return fmt.Errorf("read fingerprints in %s: %w", r.root, err)
	}
	return nil
}

// checkCopies fails the publication before any byte is visible ("never a
// partial write") when a bundle file it copies is missing or is not the
// manifest's: the digest of every file this plan copies — only those, so
// the cost still follows the change — while staging, or in a pass of its
// own after the sizes (cheap). Staging names nothing until every file is
// verified, so it checks the sizes only when it fails (prepare): up front
// they cost three system calls per file for nothing.
func (r *publication) checkCopies(ctx context.Context, copies []string, staging bool) error {
	if len(copies) == 0 {
		return nil
	}
	if r.pub.Bundle == nil {
		return errors.New("engine: publication copies files but has no bundle")
	}
	if !staging {
		if err := r.pub.Bundle.CheckSizes(ctx, copies); err != nil {
			return err
		}
	}
	startItems(ctx, "checking bundle", r.writes, func(it planner.Item) bool { _, ok := r.content[it.Path]; return !ok })
	if staging {
		return nil
	}
	return r.e.verifyCopies(ctx, r.pub.Bundle, copies)
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

// write writes every planned output (naming the staged ones).
func (r *publication) write(ctx context.Context) error {
	startItems(ctx, "writing", r.writes, nil)

	// The backend writes the next catalog beside the outputs as it sees
	// fit (see storage.Backend.PrepareCatalog), and the lease is confirmed
	// for its commit beside them too: after the plan read the catalog the
	// commit swaps against, which is all the fence needs (see confirming).
	r.cat = r.root.PrepareCatalog(ctx, catalogDocument(r.pl.Plan.Next), len(r.writes))
	r.confirmed = confirming(ctx, r.l)
	written, err := r.e.writeAll(ctx, r.root, r.l, r.pub, r.writes, r.content, r.pl.stored, r.pl.fps, r.stg)
	r.res.Written = append(r.res.Written, written...)
	if err != nil {
		r.closeStage()

		// Deletes are skipped; roll the landed writes forward so the catalog
		// describes them (and a retry does not collide with them).
		// The intent stays: a retry of this event reports these writes.
		return r.rollForward(ctx, "write", err)
	}
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
	saved := r.saveFingerprints(ctx, p.Next)
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
		if err := r.root.Delete(ctx, later...); err != nil {
			return fmt.Errorf("delete in %s: %w", r.root, err)
		}
		r.res.Deleted = append(r.res.Deleted, later...)
	}
	r.reportUpdated()
	if err := commitPending(ctx, r.root, r.l, r.confirmed, r.cat, r.pl.st.version); err != nil {
		return err
	}

	// The index's writes, too, are done before the intent goes.
	saved()
	r.settle(ctx)
	return nil
}

// reportUpdated adds the records updated without a byte write to the
// result. Items are large and a republish may update every record:
// counted first, the report is one allocation instead of a doubling
// series.
func (r *publication) reportUpdated() {
	items := r.pl.Plan.Items
	updated := func(it *planner.Item) bool {
		return it.Action == planner.Update && !it.Write && !r.seen[it.Path] // carried ones are reported as written
	}
	n := 0
	for i := range items {
		if updated(&items[i]) {
			n++
		}
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
func (r *publication) saveFingerprints(ctx context.Context, next *catalog.Catalog) (wait func()) {
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

func (r *publication) closeStage() {
	if r.stg != nil {
		r.stg.Close()
	}
}
