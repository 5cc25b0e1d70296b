package service

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// CLI exit codes.
const (
	ExitOK      = 0 // done
	ExitFailed  = 1 // the run failed: I/O, storage, bundle content, an internal error
	ExitUsage   = 2 // the input cannot be published as given: usage, configuration, event, location, manifest
	ExitRefused = 3 // refused by the destination's state: collision, superseded, catalog, limits, lease
	ExitDamaged = 4 // verify found missing or damaged outputs
)

// Outcome is what an error from a run means, for everyone who reports it:
// `serve` retries and fills its result event from it, the CLI exits with
// its code.
type Outcome struct {
	// Type is the result event type: published, superseded, collision or
	// failed.
	Type string

	// Retry: the same request may succeed later (storage or NATS trouble,
	// a busy root, a lost race); serve redelivers it with back-off.
	Retry bool

	// Reason is the failed event's reason code (events.Reason*); empty for
	// the other types.
	Reason string

	// ExitCode is the CLI's exit status. It follows from Type and Reason
	// alone (ResultExitCode), so `publish`, which sees only the events of
	// `serve`, exits as `apply` would.
	ExitCode int
}

// rule is one row of the classification: errors matching it have its
// outcome. The first matching row wins.
type rule struct {
	match   func(error) bool
	outcome Outcome
}

func is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

func failed(reason string, retry bool) Outcome {
	return Outcome{Type: events.TypeFailed, Retry: retry, Reason: reason, ExitCode: reasonExit(reason)}
}

// rules is the one table from errors to outcomes. Transient rows come
// first: an error that is transient anywhere in its chain is retried.
func rules() []rule {
	return []rule{
		{is(engine.ErrSuperseded), Outcome{Type: events.TypeSuperseded, ExitCode: ExitRefused}},
		{is(engine.ErrCollision), Outcome{Type: events.TypeCollision, ExitCode: ExitRefused}},

		// Another holder has the root, or took it over while this run held
		// it (or this run's renewals stalled): the destination is busy, which
		// is a refusal to the CLI and a retry to serve.
		{is(lease.ErrHeld, lease.ErrLost), failed(events.ReasonRefused, true)},
		// Storage or NATS trouble, a lost race or a root swapped under the
		// run: the retry re-reads, re-plans and opens the new folder.
		{is(storage.ErrUnavailable, storage.ErrConflict, storage.ErrRootChanged, engine.ErrCatalogRace,
			context.DeadlineExceeded, context.Canceled,
			nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed, nats.ErrConnectionDraining,
			nats.ErrConnectionReconnecting, nats.ErrDisconnected,
			// A stream (the lease bucket's) between leaders answers nothing.
			jetstream.ErrNoStreamResponse), failed(events.ReasonStorage, true)},

		// Terminal: retrying only delays the report until someone acts.
		{is(storage.ErrRootMissing), failed(events.ReasonRootMissing, false)},
		{is(storage.ErrDenied), failed(events.ReasonStorageDenied, false)},
		{is(ErrUnknownPipeline), failed(events.ReasonUnknownPipeline, false)},
		{is(ErrUnknownDestination), failed(events.ReasonUnknownDestination, false)},
		{is(config.ErrBundleNotAllowed), failed(events.ReasonBundleNotAllowed, false)},
		// A roll back to a version the events stream does not know (a CLI
		// error; no event carries it).
		{is(ErrUnknownVersion), failed(events.ReasonInvalidEvent, false)},
		{is(bundle.ErrDigestMismatch), failed(events.ReasonDigestMismatch, false)},
		{is(bundle.ErrContentMismatch), failed(events.ReasonContentMismatch, false)},
		{is(bundle.ErrNoManifest, bundle.ErrMissingFile, storage.ErrNotExist), failed(events.ReasonBundleMissing, false)},
		{is(bundle.ErrFutureCreated), failed(events.ReasonInvalidBundle, false)},
		{is(bundle.ErrInvalidManifest, bundle.ErrBadLocation, planner.ErrDuplicateOutput, planner.ErrPathConflict,
			planner.ErrSelector, config.ErrInvalid), failed(events.ReasonInvalidEvent, false)},
		{is(catalog.ErrInvalid), failed(events.ReasonInvalidCatalog, false)},
		// `unlock` given another id than the lock's: the root's state
		// refuses it.
		{is(lease.ErrWrongID), failed(events.ReasonRefused, false)},
		{is(catalog.ErrNewer), failed(events.ReasonNewerCatalog, false)},
		{is(planner.ErrEmptyReplacement, planner.ErrTooManyDeletes, engine.ErrLegacyCatalog, storage.ErrSymlink), failed(events.ReasonRefused, false)},
	}
}

// Classify maps any error of a run to its outcome; nil is published.
// Unknown errors are terminal failures with reason internal.
func Classify(err error) Outcome {
	if err == nil {
		return Outcome{Type: events.TypePublished, ExitCode: ExitOK}
	}
	for _, r := range rules() {
		if r.match(err) {
			return r.outcome
		}
	}
	return failed(events.ReasonInternal, false)
}

// ResultExitCode is the CLI exit status for a result event: what Classify
// gives the error behind it.
func ResultExitCode(r events.Result) int {
	switch r.Type {
	case events.TypeCollision, events.TypeSuperseded:
		return ExitRefused
	case events.TypeFailed:
		return reasonExit(r.Reason)
	}
	return ExitOK
}

// reasonExit: refusals by the destination's state exit 3, input that
// cannot be published as given exits 2, everything else (including
// max_deliveries) 1.
func reasonExit(reason string) int {
	switch reason {
	case events.ReasonRefused, events.ReasonInvalidCatalog, events.ReasonNewerCatalog:
		return ExitRefused
	case events.ReasonInvalidEvent, events.ReasonUnknownPipeline, events.ReasonUnknownDestination, events.ReasonBundleNotAllowed,
		events.ReasonInvalidBundle:
		return ExitUsage
	}
	return ExitFailed
}
