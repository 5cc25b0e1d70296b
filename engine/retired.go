package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// RetiredPath records the root's retired paths: what replacement
// publications with retain_previous dropped from the catalog but left in
// storage for readers of the previous version, each with the time after
// which a sweep removes it (see Retired paths in the package doc).
const RetiredPath = catalog.ReservedDir + "/retired.json"

// retiredEntry is one retired path and the stored version it holds.
type retiredEntry struct {
	Path          string    `json:"path"`
	PipelineID    string    `json:"pipeline_id"`
	DestinationID string    `json:"destination_id"`
	SHA256        string    `json:"sha256"`
	Size          int64     `json:"size"`
	Fingerprint   string    `json:"fingerprint,omitempty"`
	Due           time.Time `json:"due"`
}

type retiredDoc struct {
	Version int            `json:"version"`
	Retired []retiredEntry `json:"retired"`
}

// retiredRead is the root's retired record as read, at version (""
// when there is none).
type retiredRead struct {
	entries []retiredEntry
	version storage.Version
}

// readRetired reads the root's retired record. A record it cannot parse
// is damage: refused, so that nothing it names is mistaken for content
// distributor does not manage or removed by guess.
func readRetired(ctx context.Context, root storage.Backend) (retiredRead, error) {
	data, v, err := root.ReadVersion(ctx, RetiredPath)
	if err != nil {
		return retiredRead{}, fmt.Errorf("read %s in %s: %w", RetiredPath, root, err)
	}
	if data == nil {
		return retiredRead{}, nil
	}
	var doc retiredDoc
	if err := json.Unmarshal(data, &doc); err != nil || doc.Version != 1 {
		return retiredRead{}, fmt.Errorf("unreadable %s in %s: remove the paths it names by hand, then the file (%v)", RetiredPath, root, err)
	}
	return retiredRead{entries: doc.Retired, version: v}, nil
}

// writeRetired replaces the record read at rr.version with entries (none:
// the record is removed), while the lease holds; durable on return.
func writeRetired(ctx context.Context, root storage.Backend, l lease.Lease, rr retiredRead, entries []retiredEntry) (retiredRead, error) {
	if err := l.Err(); err != nil {
		return rr, err
	}
	if len(entries) == 0 {
		if rr.version == "" {
			return rr, nil
		}
		if err := root.DeleteIfVersion(ctx, RetiredPath, rr.version); err != nil {
			return rr, fmt.Errorf("remove %s in %s: %w", RetiredPath, root, err)
		}
		return retiredRead{}, nil
	}
	slices.SortFunc(entries, func(a, b retiredEntry) int { return strings.Compare(a.Path, b.Path) })
	data, err := json.MarshalIndent(retiredDoc{Version: 1, Retired: entries}, "", "  ")
	if err != nil {
		return rr, err
	}
	v, err := root.WriteIfVersion(ctx, RetiredPath, data, rr.version)
	if err != nil {
		return rr, fmt.Errorf("write %s in %s: %w", RetiredPath, root, err)
	}
	return retiredRead{entries: entries, version: v}, nil
}

// readRetiredBeside starts reading the retired record of a publication
// that retains what it drops, beside the catalog (it sweeps the record
// too); others read it only when a collision may be a retired path
// (replanRetired). The result waits for the read and returns the first
// of err (the read beside it) and its own error.
func readRetiredBeside(ctx context.Context, root storage.Backend, pub Publication) func(err error) (retiredRead, error) {
	if pub.RetainPrevious <= 0 {
		return func(err error) (retiredRead, error) { return retiredRead{}, err }
	}
	type read struct {
		rr  retiredRead
		err error
	}
	done := make(chan read, 1)
	go func() {
		rr, err := readRetired(ctx, root)
		done <- read{rr, err}
	}()
	return func(err error) (retiredRead, error) {
		r := <-done
		if err == nil {
			err = r.err
		}
		return r.rr, err
	}
}

// replanRetired plans in again when some of its collisions are retired
// paths, which a publication writes over as over its own.
func (pl *planned) replanRetired(ctx context.Context, root storage.Backend, in planner.Input) error {
	var err error
	if pl.retired, err = readRetired(ctx, root); err != nil || len(pl.retired.entries) == 0 {
		return err
	}
	markRetired(pl.stored, pl.retired)
	pl.Plan, err = planner.Build(in)
	return err
}

// markRetired marks the stored objects that are retired paths still
// holding the version retired (planner.Stored.Retired): a publication
// writes over them as over its own outputs.
func markRetired(stored map[string]planner.Stored, rr retiredRead) {
	for _, en := range rr.entries {
		s, ok := stored[en.Path]
		if ok && s.Fingerprint == en.Fingerprint {
			s.Retired = true
			stored[en.Path] = s
		}
	}
}

// retains reports whether the publication keeps the paths it drops.
func (r *publication) retains() bool {
	return r.pub.RetainPrevious > 0 && r.pub.Workflow == planner.Replacement
}

// retire records paths, which the commit about to follow drops from the
// catalog, as retired until RetainPrevious from now, instead of deleting
// them: recorded before that commit, so that no crash leaves them in
// storage recorded nowhere.
func (r *publication) retire(ctx context.Context, paths []string) error {
	recs := map[string]catalog.Output{}
	if r.pl.st.cat != nil {
		recs = r.pl.st.cat.Index()
	}
	again := make(map[string]bool, len(paths))
	for _, p := range paths {
		again[p] = true
	}
	entries := slices.DeleteFunc(slices.Clone(r.pl.retired.entries), func(en retiredEntry) bool { return again[en.Path] })
	due := r.e.now().Add(r.pub.RetainPrevious)
	retired := make([]retiredEntry, len(paths))
	err := r.e.forEach(ctx, len(paths), func(ctx context.Context, i int) error {
		fp, err := r.fingerprintOf(ctx, paths[i])
		rec := recs[paths[i]]
		retired[i] = retiredEntry{Path: paths[i], PipelineID: rec.PipelineID, DestinationID: rec.DestinationID,
			SHA256: rec.SHA256, Size: rec.Size, Fingerprint: fp, Due: due}
		return err
	})
	if err == nil {
		err = ctx.Err() // a cancelled run stops taking work and leaves entries unfilled
	}
	if err != nil {
		return err
	}
	r.pl.retired, err = writeRetired(ctx, r.root, r.l, r.pl.retired, append(entries, retired...))
	return err
}

// fingerprintOf is the stored version at p: as the plan found it, or
// looked up.
func (r *publication) fingerprintOf(ctx context.Context, p string) (string, error) {
	if s, ok := r.pl.stored[p]; ok {
		return s.Fingerprint, nil
	}
	oi, err := r.root.Stat(ctx, p)
	if errors.Is(err, storage.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("retire %s in %s: %w", p, r.root, err)
	}
	return oi.Fingerprint, nil
}

// SweepRetired removes the root's retired paths that are due, under l,
// and returns them. Only a path that still holds the version retired
// and that no catalog record names is removed; the others leave the
// record without a delete (written over since, or published again).
func (e *Engine) SweepRetired(ctx context.Context, root storage.Backend, l lease.Lease) ([]string, error) {
	rr, err := readRetired(ctx, root)
	if err != nil || rr.version == "" {
		return nil, err
	}
	// Of a large catalog, the records at the retired paths: the only
	// paths the sweep asks about, so those read say which are recorded.
	retired := make(map[string]bool, len(rr.entries))
	for _, en := range rr.entries {
		retired[en.Path] = true
	}
	st, done, err := e.readSelected(ctx, root, recordRule{match: func(o *catalog.Output) bool { return retired[o.Path] }, hint: len(retired)})
	if err != nil {
		return nil, err
	}
	defer done()
	var recordedAt func(string) bool
	if st.cat != nil {
		recordedAt = wholeCatalog{st.cat}.has
	}
	return e.sweep(ctx, root, l, recordedAt, rr, nil)
}

// sweep is SweepRetired of the record rr, against the catalog whose
// records recordedAt finds (nil: none); gone are paths known to hold no
// retired bytes any more (a publication deleted them in the way of its
// writes).
func (e *Engine) sweep(ctx context.Context, root storage.Backend, l lease.Lease, recordedAt func(string) bool, rr retiredRead, gone []string) ([]string, error) {
	deleted := make(map[string]bool, len(gone))
	for _, p := range gone {
		deleted[p] = true
	}
	now := e.now()
	var keep []retiredEntry
	var remove []string
	changed := false
	for _, en := range rr.entries {
		if recordedAt != nil && recordedAt(en.Path) || deleted[en.Path] {
			changed = true
			continue
		}
		if now.Before(en.Due) {
			keep = append(keep, en)
			continue
		}
		changed = true
		oi, err := root.Stat(ctx, en.Path)
		switch {
		case errors.Is(err, storage.ErrNotExist), errors.Is(err, storage.ErrSymlink):
		case err != nil:
			return nil, fmt.Errorf("sweep %s in %s: %w", en.Path, root, err)
		case oi.Fingerprint == en.Fingerprint:
			remove = append(remove, en.Path)
		}
	}
	if !changed {
		return nil, nil
	}
	if len(remove) > 0 {
		if err := l.Err(); err != nil {
			return nil, err
		}
		if err := root.Delete(ctx, remove...); err != nil {
			return nil, fmt.Errorf("remove retired paths in %s: %w", root, err)
		}
	}
	if _, err := writeRetired(ctx, root, l, rr, keep); err != nil {
		return remove, err
	}
	return remove, nil
}

// sweepAfterCommit sweeps the root's retired paths once the publication
// committed (next is its catalog). Only space and tidiness are at stake:
// a failure is logged and left to the next sweep.
func (r *publication) sweepAfterCommit(ctx context.Context, next recorded) {
	if r.pl.retired.version == "" {
		return
	}
	var recordedAt func(string) bool
	if next != nil {
		recordedAt = next.has
	}
	if _, err := r.e.sweep(ctx, r.root, r.l, recordedAt, r.pl.retired, r.displaced); err != nil {
		r.e.Log.Warn().Err(err).Str("root", r.root.String()).Msg("could not remove due retired paths; the next sweep does")
	}
}

// RetiredStatus is what a root keeps retired: how many paths, and when
// the last of them is due for removal.
type RetiredStatus struct {
	Paths int
	Until time.Time

	// Next is when the first of them is due.
	Next time.Time
}

// RetiredDue reports, reading without a lease, whether a retired path
// of root is due for removal (SweepRetired).
func (e *Engine) RetiredDue(ctx context.Context, root storage.Backend) (bool, error) {
	rs, err := retiredStatus(ctx, root)
	return rs.Paths > 0 && !rs.Next.After(e.now()), err
}

// retiredStatus sums up the root's retired record.
func retiredStatus(ctx context.Context, root storage.Backend) (RetiredStatus, error) {
	rr, err := readRetired(ctx, root)
	if err != nil {
		return RetiredStatus{}, err
	}
	var s RetiredStatus
	for _, en := range rr.entries {
		s.Paths++
		if en.Due.After(s.Until) {
			s.Until = en.Due
		}
		if s.Next.IsZero() || en.Due.Before(s.Next) {
			s.Next = en.Due
		}
	}
	return s, nil
}
