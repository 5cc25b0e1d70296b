package engine

import (
	"errors"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
)

// RequestFor is the request a bundle-ready event asks for.
func RequestFor(ev events.BundleReady) Request {
	return Request{PipelineID: ev.PipelineID, Bundle: ev.Bundle, ManifestDigest: ev.ManifestDigest,
		Destinations: ev.Destinations, BundleEventID: ev.ID, TakeOwnership: ev.TakeOwnership,
		AllowOlder: ev.AllowOlder}
}

// Event is the bundle-ready event equivalent to r, for the result events
// of a run nobody announced (apply): digest is the opened bundle's.
func (r Request) Event(digest string) events.BundleReady {
	return events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: r.BundleEventID,
		PipelineID: r.PipelineID, Bundle: r.Bundle, ManifestDigest: digest, Destinations: r.Destinations,
		TakeOwnership: r.TakeOwnership, AllowOlder: r.AllowOlder}
}

// ResultEvent is the result event of one destination of ev, typed by
// Classify: published, superseded (the destination holds a newer version
// of the source; with both identities), collision (with the paths and the
// original event, for replay) or failed (with its reason code; exhausted
// marks a transient failure on the last allowed delivery: reason
// max_deliveries). `serve` and `apply` report through it.
func ResultEvent(ev events.BundleReady, dest string, res Result, err error, attempt int, exhausted bool) events.Result {
	o := Classify(err)
	r := events.Result{Type: o.Type, BundleEventID: ev.ID, PipelineID: ev.PipelineID, DestinationID: dest, Attempts: attempt}
	if err != nil {
		r.Message = err.Error()
	}
	var se *SupersededError
	switch o.Type {
	case events.TypeSuperseded:
		// Terminal and not a failure: nothing to retry or replay.
		fillCounts(&r, res)
		if errors.As(err, &se) {
			r.Source = sourceRef(se.Source)
			r.SupersededBy = sourceRef(se.By)
		}
		return r
	case events.TypeCollision:
		r.Collisions = res.Plan.Collisions
		orig := ev
		r.Original = &orig
	case events.TypeFailed:
		r.Reason = o.Reason
		if exhausted {
			r.Reason = events.ReasonMaxDeliveries
		}
		orig := ev
		r.Original = &orig
	}
	fillCounts(&r, res)
	return r
}

// MaintenanceEvent is the pruned or reconciled event (typ) of a
// maintenance run on one destination: `prune` and `reconcile-state`
// report through it.
func MaintenanceEvent(typ, pipeline, dest string, res MaintenanceResult) events.Result {
	r := events.Result{Type: typ, PipelineID: pipeline, DestinationID: dest}
	switch typ {
	case events.TypePruned:
		r.Deleted = len(res.Plan.Removed)
	case events.TypeReconciled:
		r.Removed = len(res.Plan.Removed)
		r.SizeMismatches = res.Plan.SizeMismatches
	}
	for _, o := range res.Plan.Removed {
		r.Outputs = append(r.Outputs, events.OutputRef{Path: o.Path, SHA256: o.SHA256, Size: o.Size, URL: o.URL, Action: events.ActionDeleted})
	}
	return r
}

// fillCounts copies what the publication did into the event.
func fillCounts(r *events.Result, res Result) {
	r.Written = len(res.Written)
	r.Deleted = len(res.Deleted)
	r.Unchanged = res.Unchanged
	for _, it := range res.Written {
		r.Outputs = append(r.Outputs, events.OutputRef{Path: it.Path, SHA256: it.Record.SHA256, Size: it.Record.Size, URL: it.Record.URL, Action: events.ActionWritten})
		if it.Adopted {
			r.Adopted = append(r.Adopted, it.Path)
		}
	}
	r.Updated = len(res.Updated)
	for _, it := range res.Updated {
		r.Outputs = append(r.Outputs, events.OutputRef{Path: it.Path, SHA256: it.Record.SHA256, Size: it.Record.Size, URL: it.Record.URL, Action: events.ActionUpdated})
	}
	for _, p := range res.Deleted {
		r.Outputs = append(r.Outputs, events.OutputRef{Path: p, Action: events.ActionDeleted})
	}
	for _, it := range res.Plan.Items {
		// A delete's record is the removed one: an older source's.
		if it.Action != planner.Delete && it.Record.Source.ID != "" {
			r.Source = sourceRef(it.Record.Source)
			break
		}
	}
}

func sourceRef(s catalog.Source) *events.SourceRef {
	return &events.SourceRef{ID: s.ID, Digest: s.Digest, Created: s.Created}
}
