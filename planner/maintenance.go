package planner

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/distributor/distributor/catalog"
)

// ErrSelector marks a reconcile selector that names no scope or two.
var ErrSelector = errors.New("invalid owner selection")

// MaintenancePlan is the outcome of Prune or Reconcile.
type MaintenancePlan struct {
	// Removed are the records taken out of the catalog, in path order. Prune
	// deletes their bytes too; reconcile drops records whose bytes are gone.
	Removed []catalog.Output

	// SizeMismatches are selected paths whose stored size differs from the
	// record (reconcile only). They are reported, never changed.
	SizeMismatches []string

	// Next is the catalog after the plan: equal to the input when nothing
	// changes, nil when the input was nil (no catalog, nothing managed).
	Next *catalog.Catalog

	// Changed is true when Next differs from the input and must be written.
	Changed bool
}

// Selector picks the records reconcile-state looks at: one owner
// (--pipeline P --destination D) or every owner (--all-owners), optionally
// narrowed to records written by one destination id (--all-owners --destination D).
type Selector struct {
	Owner         *catalog.Owner
	DestinationID string
	AllOwners     bool
}

// Validate checks that the selector names exactly one scope.
func (s Selector) Validate() error {
	switch {
	case s.AllOwners && s.Owner != nil:
		return fmt.Errorf("%w: pass --pipeline with --destination, or --all-owners, not both", ErrSelector)
	case !s.AllOwners && s.Owner == nil:
		return fmt.Errorf("%w: pass --pipeline with --destination, or --all-owners", ErrSelector)
	case s.Owner != nil && (s.Owner.PipelineID == "" || s.Owner.DestinationID == ""):
		return fmt.Errorf("%w: an owner needs both --pipeline and --destination", ErrSelector)
	case s.Owner != nil && s.DestinationID != "":
		return fmt.Errorf("%w: a destination filter applies to --all-owners only; the owner already names its destination", ErrSelector)
	}
	return nil
}

// Matches reports whether the selector covers record o.
func (s Selector) Matches(o catalog.Output) bool {
	if s.Owner != nil {
		return o.Owner() == *s.Owner
	}
	return s.AllOwners && (s.DestinationID == "" || o.DestinationID == s.DestinationID)
}

// Prune removes owner's records whose updated_at is strictly before cutoff
// (a record exactly at the cutoff stays). Other owners' records are never
// touched. A delete set larger than maxDeletes (when > 0) is refused whole.
func Prune(cat *catalog.Catalog, owner catalog.Owner, cutoff time.Time, now time.Time, maxDeletes int) (MaintenancePlan, error) {
	if owner.PipelineID == "" || owner.DestinationID == "" {
		return MaintenancePlan{}, fmt.Errorf("%w: prune needs both --pipeline and --destination", ErrSelector)
	}
	if cutoff.After(now) {
		// A cutoff in the future would prune what was just published.
		return MaintenancePlan{}, fmt.Errorf("prune cutoff %s is after now (%s): the age must not be negative",
			catalog.FormatTime(cutoff), catalog.FormatTime(now))
	}
	return removeRecords(cat, now, maxDeletes, func(o catalog.Output) bool {
		return PruneRemoves(owner, cutoff, &o)
	})
}

// PruneRemoves reports whether Prune of owner at cutoff removes record o.
// A prune planned with a catalog holding only such records (and the
// catalog's own fields) is the prune of the whole catalog, but that its
// Next holds none of the others: they stay as they are.
func PruneRemoves(owner catalog.Owner, cutoff time.Time, o *catalog.Output) bool {
	return o.PipelineID == owner.PipelineID && o.DestinationID == owner.DestinationID && o.UpdatedAt.Before(cutoff)
}

// Reconcile removes the selected records whose bytes are missing from stored
// and reports those whose stored size differs. It never adds a record:
// unmanaged content stays unmanaged. stored must list every selected path
// that exists. A catalog holding only the records sel matches gives the
// plan of the whole catalog, but that Next holds only those records.
func Reconcile(cat *catalog.Catalog, sel Selector, stored map[string]Stored, now time.Time, maxDeletes int) (MaintenancePlan, error) {
	if err := sel.Validate(); err != nil {
		return MaintenancePlan{}, err
	}
	var mismatches []string
	p, err := removeRecords(cat, now, maxDeletes, func(o catalog.Output) bool {
		if !sel.Matches(o) {
			return false
		}
		s, ok := stored[o.Path]
		if ok && s.Size != o.Size {
			mismatches = append(mismatches, o.Path)
		}
		return !ok
	})
	if err != nil {
		return MaintenancePlan{}, err
	}
	sort.Strings(mismatches)
	p.SizeMismatches = mismatches
	return p, nil
}

// removeRecords drops the records drop selects, all or nothing.
func removeRecords(cat *catalog.Catalog, now time.Time, maxDeletes int, drop func(catalog.Output) bool) (MaintenancePlan, error) {
	if now.IsZero() {
		return MaintenancePlan{}, errors.New("planner: now is required")
	}
	if cat == nil {
		return MaintenancePlan{}, nil
	}
	next := *cat
	next.Outputs = make([]catalog.Output, 0, len(cat.Outputs))
	var removed []catalog.Output
	for _, o := range cat.Outputs {
		if drop(o) {
			removed = append(removed, o)
			continue
		}
		next.Outputs = append(next.Outputs, o)
	}
	if maxDeletes > 0 && len(removed) > maxDeletes {
		return MaintenancePlan{}, fmt.Errorf("%w: %d deletes, max_deletes is %d; nothing was deleted", ErrTooManyDeletes, len(removed), maxDeletes)
	}
	next.Sort()
	sort.Slice(removed, func(i, j int) bool { return removed[i].Path < removed[j].Path })
	p := MaintenancePlan{Removed: removed, Next: &next, Changed: len(removed) > 0}
	if p.Changed {
		next.UpdatedAt = now
	}
	return p, nil
}
