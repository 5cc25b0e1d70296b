package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
	"github.com/distributor/distributor/storage"
)

// ErrLegacyCatalog: a maintenance command met superseded legacy state; there
// are no managed records to maintain until a publication writes v4.
var ErrLegacyCatalog = errors.New("the catalog is superseded legacy state (schema_version < 4): nothing is managed yet; publish once to write a v4 catalog")

// MaintenanceResult says what prune or reconcile-state did (or would do).
type MaintenanceResult struct {
	Root string
	Plan planner.MaintenancePlan

	// Refreshed are size-mismatched records re-hashed into the catalog
	// (reconcile-state --refresh).
	Refreshed []catalog.Output

	// Leftovers of interrupted writes removed (reconcile-state; with
	// DryRun: found).
	Leftovers LeftoverReport
	DryRun    bool

	// Swept are the due retired paths removed (prune).
	Swept []string
}

// startMaintenance is how prune and reconcile-state begin: roll an
// interrupted run forward (a dry run changes nothing, so it plans against
// the root as it is), then read the catalog to plan against, of a large
// one the records sel selects (readSelected). Legacy state is an error,
// no catalog is an empty plan (nil catalog). done ends the read once the
// next catalog is committed.
func (e *Engine) startMaintenance(ctx context.Context, root storage.Backend, l lease.Lease, dryRun bool, sel recordSelection) (state, func(), error) {
	if !dryRun {
		if _, err := e.Recover(ctx, root, l); err != nil {
			return state{}, func() {}, err
		}
	}
	st, done, err := e.readSelected(ctx, root, sel)
	if err == nil && st.legacy {
		done()
		err = fmt.Errorf("%s: %w", root, ErrLegacyCatalog)
	}
	return st, done, err
}

// PruneOptions say what Prune removes and whether it only plans.
type PruneOptions struct {
	// Cutoff: outputs last updated before it go.
	Cutoff time.Time

	// MaxDeletes refuses a run that would remove more (0: no limit).
	MaxDeletes int

	// DryRun plans and changes nothing.
	DryRun bool
}

// Prune deletes the outputs owned by owner whose updated_at is before
// opts.Cutoff (bytes, then records).
func (e *Engine) Prune(ctx context.Context, root storage.Backend, l lease.Lease, owner catalog.Owner, opts PruneOptions) (MaintenanceResult, error) {
	res := MaintenanceResult{Root: root.String(), DryRun: opts.DryRun}
	st, done, err := e.startMaintenance(ctx, root, l, opts.DryRun, recordRule{match: func(o *catalog.Output) bool {
		return planner.PruneRemoves(owner, opts.Cutoff, o)
	}})
	if err != nil {
		return res, err
	}
	defer done()
	p, err := planner.Prune(st.cat, owner, opts.Cutoff, e.now(), opts.MaxDeletes)
	res.Plan = p
	if err != nil {
		return res, fmt.Errorf("%s: %w", root, err)
	}
	if opts.DryRun {
		return res, nil
	}
	if res.Swept, err = e.SweepRetired(ctx, root, l); err != nil {
		return res, err
	}
	if !p.Changed {
		return res, nil
	}
	paths := make([]string, len(p.Removed))
	for i, o := range p.Removed {
		paths[i] = o.Path
	}

	// The same intent as a publication's: a kill after some deletes leaves
	// records whose bytes are gone, and recovery drops exactly those.
	wrote, err := putIntent(ctx, root, l, intentDoc{Deletes: paths})
	if err != nil {
		return res, err
	}
	if err := l.Err(); err != nil {
		return res, err
	}
	var size int64
	for _, o := range p.Removed {
		size += o.Size
	}
	progress.Start(ctx, "deleting", int64(len(paths)), size)
	if err := root.Delete(ctx, paths...); err != nil {
		return res, fmt.Errorf("delete in %s: %w", root, err)
	}
	progress.Add(ctx, int64(len(paths)), size)
	if err := e.commit(ctx, root, l, st, p.Next); err != nil {
		return res, err
	}
	e.dropIntent(ctx, root, l, wrote)
	return res, nil
}

// ReconcileOptions say how Reconcile repairs and whether it only plans.
type ReconcileOptions struct {
	// Refresh re-hashes objects whose size differs from their record and
	// records their current digest and size.
	Refresh bool

	// MaxDeletes refuses a run that would remove more records (0: no limit).
	MaxDeletes int

	// DryRun plans and changes nothing.
	DryRun bool
}

// Reconcile removes the selected records whose bytes are missing and reports
// size mismatches (see ReconcileOptions.Refresh). It never adopts unmanaged
// files.
func (e *Engine) Reconcile(ctx context.Context, root storage.Backend, l lease.Lease, sel planner.Selector, opts ReconcileOptions) (MaintenanceResult, error) {
	res := MaintenanceResult{Root: root.String(), DryRun: opts.DryRun}
	st, done, err := e.startMaintenance(ctx, root, l, opts.DryRun, recordRule{match: func(o *catalog.Output) bool { return sel.Matches(*o) }})
	if err != nil {
		return res, err
	}
	defer done()

	// The whole root's, whatever the selection: they belong to no record.
	if opts.DryRun {
		res.Leftovers, err = e.Leftovers(ctx, root)
	} else {
		res.Leftovers, err = e.CleanLeftovers(ctx, root, l)
	}
	if err != nil {
		return res, err
	}
	stored, err := storedSelected(ctx, root, st, sel)
	if err != nil {
		return res, err
	}
	now := e.now()
	p, err := planner.Reconcile(st.cat, sel, stored, now, opts.MaxDeletes)
	res.Plan = p
	if err != nil {
		return res, fmt.Errorf("%s: %w", root, err)
	}
	next, changed := p.Next, p.Changed
	if opts.Refresh && len(p.SizeMismatches) > 0 {
		index := next.Index()
		progress.Start(ctx, "re-hashing", int64(len(p.SizeMismatches)), -1)
		for _, path := range p.SizeMismatches {
			rec := index[path]
			sum, size, err := hashAndSize(ctx, root, path)
			if err != nil {
				return res, fmt.Errorf("refresh %s in %s: %w", path, root, err)
			}
			progress.Add(ctx, 1, size)
			rec.SHA256, rec.Size, rec.UpdatedAt = sum, size, now
			index[path] = rec
			res.Refreshed = append(res.Refreshed, rec)
		}
		n := *next
		n.Outputs = n.Outputs[:0:0]
		for _, o := range index {
			n.Outputs = append(n.Outputs, o)
		}
		n.Sort()
		n.UpdatedAt = now
		next, changed = &n, true
	}
	if opts.DryRun || !changed {
		return res, nil
	}

	// An earlier run's intent removal may not be durable yet (dropIntent).
	if err := root.Sync(ctx); err != nil {
		return res, fmt.Errorf("sync %s: %w", root, err)
	}
	return res, e.commit(ctx, root, l, st, next)
}

// storedSelected is what is stored at the paths of the records sel
// matches of those st read (the whole catalog, or what sel selects of a
// large one): Find asked about those paths alone, which a backend looks
// up one by one when they are few against what the root holds. A record
// at a link is missing like those below one (never listed): its output
// is not in the root.
func storedSelected(ctx context.Context, root storage.Backend, st state, sel planner.Selector) (map[string]planner.Stored, error) {
	var paths []string
	if st.cat != nil {
		for i := range st.cat.Outputs {
			if o := &st.cat.Outputs[i]; sel.Matches(*o) {
				paths = append(paths, o.Path)
			}
		}
	}
	if len(paths) == 0 {
		return map[string]planner.Stored{}, nil
	}
	slices.Sort(paths)
	held := storage.Held{AtMost: len(st.cat.Outputs), Paths: st.heldPaths}
	if st.paths != nil {
		held.AtMost = st.paths.Len()
	}
	keep := func(p string) bool {
		_, ok := slices.BinarySearch(paths, p)
		return ok
	}
	stored, links, err := findStored(ctx, root, paths, held, len(paths), keep, nil)
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		delete(stored, l)
	}
	return stored, nil
}

// VerifyReport lists what verify found.
type VerifyReport struct {
	Root    string   `json:"root"`
	Checked int      `json:"checked"`
	Missing []string `json:"missing"`

	// Damaged outputs hold other bytes than their record, or lead through
	// a symlink (Symlinks).
	Damaged []string `json:"damaged"`

	// InFlight are outputs that differ from their record (or are gone)
	// and that the pending intent names: a publication is changing them,
	// or was and waits for recovery. Not damage: verify again once it has
	// finished.
	InFlight []string `json:"in_flight"`

	// Symlinks are the symbolic links at or on the way to damaged outputs:
	// the outputs are not in the root, and their bytes (outside it) are
	// not to be touched; see SymlinkFix.
	Symlinks []string `json:"symlinks"`

	// PendingRecovery: an interrupted (or running) publication left its
	// intent; the next publication or maintenance command on the root
	// finishes it. Verify does not: the outputs it names show as in flight
	// until then.
	PendingRecovery bool `json:"pending_recovery"`

	// Leftovers of interrupted writes in the whole root: they cost space,
	// not correctness (reconcile-state removes them).
	Leftovers LeftoverReport `json:"leftovers"`
}

// OK reports whether no checked output is missing or damaged (outputs in
// flight are neither).
func (r VerifyReport) OK() bool { return len(r.Missing) == 0 && len(r.Damaged) == 0 }

// SymlinkFix is the operator's fix for outputs that lead through the
// symbolic links links in root.
func SymlinkFix(root string, links []string) string {
	return fmt.Sprintf("remove the symlink(s) %s in %s (distributor never follows one: it may lead outside the root), then run reconcile-state", summarize(links), root)
}

// Verify re-reads the stored bytes of every record match selects and
// compares them with the catalog's size and sha256 (bitrot). It never
// writes and takes no lease, so it checks read-only and full roots too: an
// interrupted publication is reported (PendingRecovery), not recovered,
// and a publication that starts or commits while verify reads makes it
// fail with storage.ErrConflict (run it again) rather than report that
// publication's writes as damage. Outputs that the pending intent names
// and that differ from their record are in flight, not damaged: with
// the intent unchanged from the first read to the last, its publication
// has neither committed nor been recovered, so its writes and deletes
// explain them.
func (e *Engine) Verify(ctx context.Context, root storage.Backend, match func(catalog.Output) bool) (VerifyReport, error) {
	rep := VerifyReport{Root: root.String(), Missing: []string{}, Damaged: []string{}, InFlight: []string{}, Symlinks: []string{}}
	before, intent, err := stateVersions(ctx, root)
	if err != nil {
		return rep, err
	}
	rep.PendingRecovery = before.intent != ""
	inFlight, err := intentNames(root, intent)
	if err != nil {
		return rep, err
	}
	if rep.Leftovers, err = e.Leftovers(ctx, root); err != nil {
		return rep, err
	}
	selected, err := verifySelection(ctx, root, before.catalog, match)
	if err != nil {
		return rep, err
	}
	var files, total int64
	for _, o := range selected {
		files, total = files+1, total+o.Size
	}
	progress.Start(ctx, "verifying", files, total)
	links := map[string]bool{}
	for _, o := range selected {
		rep.Checked++
		sum, size, err := hashAndSize(ctx, root, o.Path)
		progress.Add(ctx, 1, size)
		switch {
		case errors.Is(err, storage.ErrSymlink):
			// Not in the root, whatever the link leads to.
			rep.Damaged = append(rep.Damaged, o.Path)
			link, err := linkOn(ctx, root, o.Path, nil)
			if err != nil {
				return rep, fmt.Errorf("verify %s in %s: %w", o.Path, root, err)
			}
			if link != "" && !links[link] {
				links[link] = true
				rep.Symlinks = append(rep.Symlinks, link)
			}
		case errors.Is(err, storage.ErrNotExist) && inFlight(o):
			rep.InFlight = append(rep.InFlight, o.Path)
		case errors.Is(err, storage.ErrNotExist):
			rep.Missing = append(rep.Missing, o.Path)
		case err != nil:
			return rep, fmt.Errorf("verify %s in %s: %w", o.Path, root, err)
		case size == o.Size && sum == o.SHA256:
		case inFlight(o):
			rep.InFlight = append(rep.InFlight, o.Path)
		default:
			rep.Damaged = append(rep.Damaged, o.Path)
		}
	}
	if after, _, err := stateVersions(ctx, root); err != nil {
		return rep, err
	} else if after != before {
		return rep, unsettled(root)
	}
	slices.Sort(rep.Symlinks)
	return rep, nil
}

// intentNames reports whether the intent data (nil: none) names a
// record's path, as a write or a delete, that its recovery would still
// apply: not one a newer version of the same source recorded since (see
// supersedes), whose difference is damage. A torn intent names none: no
// output of it was named before its write returned.
func intentNames(root storage.Backend, data []byte) (func(catalog.Output) bool, error) {
	none := func(catalog.Output) bool { return false }
	if data == nil {
		return none, nil
	}
	doc, err := decodeIntent(data)
	if errors.Is(err, errTornIntent) && root.Properties().TornInPlace {
		return none, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	named := make(map[string]catalog.Source, len(doc.Writes)+len(doc.Deletes))
	for _, rec := range doc.Writes {
		named[rec.Path] = rec.Source
	}
	for _, p := range doc.Deletes {
		named[p] = doc.Source
	}
	return func(o catalog.Output) bool {
		v, ok := named[o.Path]
		return ok && !supersedes(o, doc, v)
	}, nil
}

// versions are the catalog's and the intent's versions ("" = absent or
// empty).
type versions struct{ catalog, intent storage.Version }

// stateVersions reads the root's versions, and the intent's bytes (nil
// when there is none).
func stateVersions(ctx context.Context, root storage.Backend) (versions, []byte, error) {
	intent, iv, err := readIntent(ctx, root)
	if err != nil {
		return versions{}, nil, fmt.Errorf("read intent in %s: %w", root, err)
	}
	if intent == nil {
		iv = ""
	}
	cv, err := catalogMark(ctx, root)
	if err != nil {
		return versions{}, nil, err
	}
	return versions{catalog: cv, intent: iv}, intent, nil
}

func unsettled(root storage.Backend) error {
	return fmt.Errorf("verify %s: a publication changed the root while verify read it: %w; run verify again", root, storage.ErrConflict)
}

func hashAndSize(ctx context.Context, root storage.Backend, path string) (string, int64, error) {
	r, err := root.Open(ctx, path)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", 0, err
	}
	return catalog.Digest(h.Sum(nil)), n, nil
}
