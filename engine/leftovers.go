package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// DefaultLeftoverAge is LeftoverAge when unset.
const DefaultLeftoverAge = time.Hour

// LeftoverReport summarises a root's leftovers (older than LeftoverAge).
type LeftoverReport struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`

	// Oldest is when the oldest one was last written; nil when none.
	Oldest *time.Time `json:"oldest,omitempty"`
	Paths  []string   `json:"paths"`

	// Recent counts the temp files and uploads younger than LeftoverAge,
	// which may be writes in flight (only Status counts them).
	Recent int `json:"recent,omitempty"`
}

func summarizeLeftovers(ls []storage.Leftover) LeftoverReport {
	rep := LeftoverReport{Count: len(ls), Paths: []string{}}
	for _, l := range ls {
		rep.Bytes += l.Size
		rep.Paths = append(rep.Paths, l.Path)
		if rep.Oldest == nil || l.ModTime.Before(*rep.Oldest) {
			t := l.ModTime.UTC()
			rep.Oldest = &t
		}
	}
	return rep
}

func (e *Engine) leftoverCutoff() time.Time {
	return time.Now().Add(-e.leftoverAge())
}

func (e *Engine) leftoverAge() time.Duration {
	if e.LeftoverAge <= 0 {
		return DefaultLeftoverAge
	}
	return e.LeftoverAge
}

// statusLeftovers is Leftovers with the younger ones counted in Recent:
// one walk of the root finds both.
func (e *Engine) statusLeftovers(ctx context.Context, root storage.Backend) (LeftoverReport, error) {
	cutoff := e.leftoverCutoff()
	all, err := root.Leftovers(ctx, time.Now().Add(e.leftoverAge()))
	if err != nil {
		return summarizeLeftovers(nil), fmt.Errorf("look for leftovers of interrupted writes in %s: %w", root, err)
	}
	old := make([]storage.Leftover, 0, len(all))
	for _, l := range all {
		if l.ModTime.Before(cutoff) {
			old = append(old, l)
		}
	}
	rep := summarizeLeftovers(old)
	rep.Recent = len(all) - len(old)
	return rep, nil
}

// Leftovers reports what interrupted writes left in root, older than
// LeftoverAge; nothing for backends that leave none. It changes nothing.
func (e *Engine) Leftovers(ctx context.Context, root storage.Backend) (LeftoverReport, error) {
	ls, err := e.leftovers(ctx, root)
	return summarizeLeftovers(ls), err
}

func (e *Engine) leftovers(ctx context.Context, root storage.Backend) ([]storage.Leftover, error) {
	ls, err := root.Leftovers(ctx, e.leftoverCutoff())
	if err != nil {
		return nil, fmt.Errorf("look for leftovers of interrupted writes in %s: %w", root, err)
	}
	return ls, nil
}

// CleanLeftovers removes what interrupted writes left in root, older than
// LeftoverAge, under l, and reports what it removed.
func (e *Engine) CleanLeftovers(ctx context.Context, root storage.Backend, l lease.Lease) (LeftoverReport, error) {
	ls, err := e.leftovers(ctx, root)
	if err != nil || len(ls) == 0 {
		return summarizeLeftovers(nil), err
	}
	if err := l.Err(); err != nil {
		return summarizeLeftovers(nil), err
	}
	if err := root.RemoveLeftovers(ctx, ls); err != nil {
		return summarizeLeftovers(nil), fmt.Errorf("remove leftovers of interrupted writes in %s: %w", root, err)
	}
	rep := summarizeLeftovers(ls)
	e.Log.Info().Str("root", root.String()).Int("count", rep.Count).Int64("bytes", rep.Bytes).
		Msg("removed leftovers of interrupted writes")
	return rep, nil
}
