package service

import (
	"errors"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
)

// RequestFor is the request a bundle-ready event asks for.
func RequestFor(ev events.BundleReady) Request {
	return Request{PipelineID: ev.PipelineID, Bundle: ev.Bundle, ManifestDigest: ev.ManifestDigest,
		Destinations: ev.Destinations, BundleEventID: ev.ID, TakeOwnership: ev.TakeOwnership,
		AllowOlder: ev.AllowOlder, DeleteLater: ev.DeleteLater, RollbackOf: ev.RollbackOf}
}

// Delivery is what a result event answers: the bundle-ready event and
// which delivery of it the run was. `serve` counts JetStream's deliveries;
// a run nobody announced has one (Request.Direct).
type Delivery struct {
	// Event is the bundle-ready event; collision and failed results carry
	// it as their original, for replay.
	Event events.BundleReady

	// Attempt numbers the delivery, from 1.
	Attempt int

	// Exhausted marks a transient failure on the last allowed delivery:
	// final, with reason max_deliveries.
	Exhausted bool
}

// Direct is the one delivery of a run nobody announced (apply): the
// bundle-ready event equivalent to r, digest the opened bundle's, so that
// its failures can be replayed through serve like any other.
func (r Request) Direct(digest string) Delivery {
	return Delivery{Attempt: 1, Event: events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady,
		ID: r.BundleEventID, PipelineID: r.PipelineID, Bundle: r.Bundle, ManifestDigest: digest, Destinations: r.Destinations,
		TakeOwnership: r.TakeOwnership, AllowOlder: r.AllowOlder, DeleteLater: r.DeleteLater, RollbackOf: r.RollbackOf}}
}

// ResultEvent is the result event of one destination of a delivery, typed
// by Classify: published, superseded (the destination holds a newer
// version of the source; with both identities), collision (with the paths
// and the original event, for replay) or failed (with its reason code, or
// max_deliveries when the delivery is exhausted). `serve` and `apply`
// report through it; `prune` and `reconcile-state` through
// MaintenanceEvent. Published and superseded results name the bundle's
// location, so that a version can be found again (history, rollback, a
// replay with allow_older); a roll back's published result carries its
// rollback_of.
func ResultEvent(dest string, res engine.Result, err error, d Delivery) events.Result {
	o := Classify(err)
	ev := d.Event
	r := events.Result{Type: o.Type, BundleEventID: ev.ID, PipelineID: ev.PipelineID, DestinationID: dest, Attempts: d.Attempt}
	if err != nil {
		r.Message = err.Error()
	}
	var se *engine.SupersededError
	switch o.Type {
	case events.TypePublished:
		r.Bundle = ev.Bundle
		if ev.AllowOlder {
			// Only an operator's event (the admin subject) may say so.
			r.RollbackOf = ev.RollbackOf
		}
	case events.TypeSuperseded:
		// Terminal and not a failure: nothing to retry; a replay with
		// allow_older rebuilds the event from bundle and source.
		r.Bundle = ev.Bundle
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
		if d.Exhausted {
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
func MaintenanceEvent(typ, pipeline, dest string, res engine.MaintenanceResult) events.Result {
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
func fillCounts(r *events.Result, res engine.Result) {
	r.Written = len(res.Written)
	r.Deleted = len(res.Deleted)
	r.Unchanged = res.Unchanged
	r.KeptNewer = res.KeptNewer
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
		// A delete's record is the removed one: an older source's; a kept
		// one's is the newer version's.
		if it.Action != planner.Delete && it.Action != planner.KeptNewer && it.Record.Source.ID != "" {
			r.Source = sourceRef(it.Record.Source)
			break
		}
	}
	if r.Source == nil && res.KeptNewer > 0 { // every planned path kept
		r.Source = sourceRef(res.Plan.Source)
	}
}

func sourceRef(s catalog.Source) *events.SourceRef {
	return &events.SourceRef{ID: s.ID, Digest: s.Digest, Created: s.Created}
}
