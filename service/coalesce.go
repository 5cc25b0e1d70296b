package service

import (
	"context"
	"fmt"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
)

// version is what a place in a root's line publishes, once its bundle's
// manifest is read: the owner and the version of its source. eligible:
// a replacement without operator flags, whose outcome newest-wins alone
// decides (an adoption or a roll back is never passed over, nor passes
// over another).
type version struct {
	owner    catalog.Owner
	source   catalog.Source
	eligible bool
}

// standing is a place in a root's line as coalescing sees it: its
// version, when known, and whether its publication has begun (then it
// runs, whatever waits behind it).
type standing struct {
	v       *version
	started bool
}

// passedOver decides which places of one root's line (in delivery order)
// need not run: a waiting replacement is superseded at once by a newer
// version of the same owner and source that waits in the line too. The
// end state of the root is what running the line one by one gives:
//
//   - a newer version later in the line publishes after it whatever runs
//     between, so the older one's publication would be replaced anyway;
//   - a newer version earlier in the line, with only versions of the same
//     source of that owner between (each known), leaves the owner holding
//     that source at least as new, so the older one would be superseded.
//     A version of another source between would replace the owner's
//     outputs and let the older one publish again: it is left to run.
//
// The answer holds, per place, the version that supersedes it (the
// newest that qualifies), or nil.
func passedOver(line []standing) []*catalog.Source {
	by := make([]*catalog.Source, len(line))
	for i, e := range line {
		if e.v == nil || !e.v.eligible || e.started {
			continue
		}
		var won *catalog.Source
		for j := i + 1; j < len(line); j++ {
			if o := line[j].v; sameSource(o, e.v) && o.eligible && newerThan(o.source, e.v.source, won) {
				won = &o.source
			}
		}
		for j := i - 1; j >= 0 && won == nil; j-- {
			o := line[j].v
			if o == nil {
				break // unknown: perhaps another source of the owner
			}
			if o.owner != e.v.owner {
				continue
			}
			if !sameSource(o, e.v) || !o.eligible {
				break
			}
			if newerThan(o.source, e.v.source, won) {
				won = &o.source
			}
		}
		by[i] = won
	}
	return by
}

// sameSource: o is a version of v's owner and source.
func sameSource(o, v *version) bool {
	return o != nil && o.owner == v.owner && o.source.ID == v.source.ID
}

// newerThan: s is newer than v and than won (when set).
func newerThan(s, v catalog.Source, won *catalog.Source) bool {
	return planner.Newer(s, v) && (won == nil || planner.Newer(s, *won))
}

// PassedOverError is the error of a publication that did not run: a newer
// version of its owner's source waited in this process's line for the
// root, and only the newest publishes. Its bundle's files were not read.
// It is an *engine.SupersededError (errors.As), reported `superseded`.
type PassedOverError struct {
	Superseded *engine.SupersededError
}

func (e *PassedOverError) Error() string {
	s := e.Superseded
	return fmt.Sprintf("%s: %s in %s: a newer version of source %s waits in this process's line for the root, created %s (digest %s), newer than this bundle's created %s (digest %s); only the newest is published",
		engine.ErrSuperseded, s.Owner, s.Root, s.By.ID, catalog.FormatTime(s.By.Created), s.By.Digest,
		catalog.FormatTime(s.Source.Created), s.Source.Digest)
}

func (e *PassedOverError) Unwrap() error { return e.Superseded }

// note records, on every place of p, the version its publication
// publishes, b's, and lets the roots' lines pass over the places that
// need not run. A request with operator flags, or an event delivered
// again, is recorded but never passed over.
func (p *Places) note(ctx context.Context, req Request, b *bundle.Bundle) {
	if p == nil {
		return
	}
	src := catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()}
	p.mu.Lock()
	all, again := p.all, p.again
	p.mu.Unlock()
	flags := req.TakeOwnership || req.AllowOlder || req.RollbackOf != "" || again
	keys := map[*rootTurns][]string{}
	for _, s := range all {
		v := &version{owner: catalog.Owner{PipelineID: req.PipelineID, DestinationID: s.dest.ID}, source: src,
			eligible: !flags && s.dest.Workflow == planner.Replacement}
		s.t.mu.Lock()
		s.v = v
		s.t.mu.Unlock()
		keys[s.t] = append(keys[s.t], s.key)
	}
	for t, ks := range keys {
		for _, k := range ks {
			t.passOver(ctx, k)
		}
	}
}

// passOver takes the places of key's line that need not run (passedOver)
// out of it: each learns why (seat.passed), and the line moves on.
func (t *rootTurns) passOver(ctx context.Context, key string) {
	t.mu.Lock()
	tu := t.q[key]
	if tu == nil {
		t.mu.Unlock()
		return
	}
	line := make([]standing, len(tu.line))
	for i, s := range tu.line {
		line[i] = standing{v: s.v, started: s.started}
	}
	var gone []*seat
	for i, by := range passedOver(line) {
		if s := tu.line[i]; by != nil && s.by == nil {
			s.by = by
			close(s.passed)
			gone = append(gone, s)
		}
	}
	t.mu.Unlock()
	for _, s := range gone {
		s.done(context.WithoutCancel(ctx))
	}
}

// passedOverError is the error of the publication of place, which by
// passed over.
func passedOverError(place *seat, d config.Destination, by catalog.Source) error {
	place.t.mu.Lock()
	v := place.v
	place.t.mu.Unlock()
	return &PassedOverError{Superseded: &engine.SupersededError{Root: d.RootKey(), Owner: v.owner, Source: v.source, By: by}}
}
