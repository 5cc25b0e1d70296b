package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
)

// Ledger delivers the result events of publications: one per (bundle
// event, destination), whatever happens between the deliveries of an
// event. It is the one place that answers "has this destination of this
// event been reported, and with what":
//
//   - A result's message id does not depend on its type
//     (events.ResultMsgID), so the events stream drops a second result for
//     the same destination of the same event within its dedup window (an
//     hour): a redelivery after NATS lost the durable's state, which comes
//     back with delivery count 1, reruns the publication but its result is
//     dropped (AlreadyReported).
//   - A redelivery first looks up the results earlier deliveries stored
//     and runs only the destinations without one.
//   - A published result that cannot be delivered (NATS is away) is kept in
//     the destination's root (engine.Engine.KeepResult); the next attempt,
//     in whichever process, delivers it instead of running again, so it
//     reports what was written, never "superseded" by its own earlier
//     attempt.
//
// `serve` hands each delivery of a bundle-ready message to Handle
// (intake.go), which decides all of this in one place and says what to
// acknowledge.
type Ledger struct {
	svc       *Service
	js        jetstream.JetStream
	subjects  events.Subjects
	publisher *events.Publisher
	log       zerolog.Logger
}

// NewLedger returns the ledger of svc's publications on the streams named
// by subjects (events.Setup).
func NewLedger(svc *Service, js jetstream.JetStream, subjects events.Subjects, log zerolog.Logger, opts ...events.PublisherOption) *Ledger {
	return &Ledger{svc: svc, js: js, subjects: subjects, publisher: events.NewPublisher(js, subjects, opts...), log: log}
}

// Status is what became of a result event.
type Status int

const (
	// Delivered: the result is stored.
	Delivered Status = iota

	// AlreadyReported: an earlier delivery's result for this destination
	// of this event is stored; this one was dropped.
	AlreadyReported

	// Retry: not delivered; a later delivery of the event delivers it.
	Retry

	// Undeliverable: not delivered, and retrying cannot help (too large,
	// or the last delivery): a minimal failed result naming the
	// bundle-ready message replaced it, if even that could be published.
	Undeliverable
)

// Publish publishes r as it is; dup reports that an earlier result for
// the same destination of the same bundle event is stored instead.
func (l *Ledger) Publish(ctx context.Context, r events.Result) (dup bool, err error) {
	return l.publisher.PublishResult(ctx, r)
}

// ResultFor is the result event of one destination of a delivery: the
// result an earlier attempt kept, or the one this attempt came to
// (ResultEvent).
func (l *Ledger) ResultFor(done Done, d Delivery) events.Result {
	if done.Result.Kept != nil {
		var r events.Result
		err := json.Unmarshal(done.Result.Kept, &r)
		if err == nil {
			r.Attempts = d.Attempt // the delivery that reports it
			return r
		}
		done.Err = fmt.Errorf("the result an earlier attempt kept in %s is unreadable: %w", done.Result.Root, err)
	}
	return ResultEvent(done.Destination.ID, done.Result, done.Err, d)
}

// Deliver publishes r, the final result of done, even once ctx ended. When it cannot be
// published and a later delivery may manage (not last, not too large), it
// is kept for that delivery (a published one in the root) and Deliver
// says Retry. ref names the bundle-ready message for the minimal failure
// that replaces a result that can never be published.
func (l *Ledger) Deliver(ctx context.Context, done Done, r events.Result, last bool, ref *events.MsgRef) Status {
	// Work abandoned at a shutdown still reports what it did.
	ctx = context.WithoutCancel(ctx)
	dup, err := l.Publish(ctx, r)
	if err != nil {
		l.log.Error().Err(err).Str("event_id", r.BundleEventID).Str("pipeline_id", r.PipelineID).Int("attempt", r.Attempts).
			Str("destination_id", r.DestinationID).Str("type", r.Type).Msg("could not publish result event")
	}
	if err == nil {
		if done.Result.Kept != nil {
			l.forget(ctx, done, r)
		}
		if dup {
			return AlreadyReported
		}
		return Delivered
	}
	if !last && !permanentPublishErr(err) {
		if done.Result.Kept == nil && r.Type == events.TypePublished {
			l.keep(ctx, done, r)
		}
		return Retry
	}
	if _, err := l.Publish(ctx, unpublished(r, err, ref)); err != nil && !last {
		return Retry
	}
	return Undeliverable
}

// keep keeps r in done's root for the next attempt (see Ledger). Failing
// that, the next attempt runs again, as it would without it.
func (l *Ledger) keep(ctx context.Context, done Done, r events.Result) {
	data, err := json.Marshal(r)
	if err == nil {
		err = l.withRoot(ctx, done, func(ctx context.Context, root storage.Backend) error {
			return l.svc.Engine.KeepResult(ctx, root, r.BundleEventID, catalog.Owner{PipelineID: r.PipelineID, DestinationID: r.DestinationID}, data)
		})
	}
	if err != nil {
		l.log.Warn().Err(err).Str("event_id", r.BundleEventID).Str("destination_id", r.DestinationID).
			Msg("could not keep the undelivered result in the root; the next attempt publishes again")
		return
	}
	l.log.Info().Str("event_id", r.BundleEventID).Str("destination_id", r.DestinationID).
		Msg("kept the undelivered result in the root for the next attempt")
}

// forget removes the result an earlier attempt kept, now delivered. One
// left behind is delivered again as a duplicate, which the stream drops.
func (l *Ledger) forget(ctx context.Context, done Done, r events.Result) {
	err := l.withRoot(ctx, done, func(ctx context.Context, root storage.Backend) error {
		return l.svc.Engine.ForgetResult(ctx, root, r.BundleEventID, catalog.Owner{PipelineID: r.PipelineID, DestinationID: r.DestinationID})
	})
	if err != nil {
		l.log.Debug().Err(err).Str("event_id", r.BundleEventID).Str("destination_id", r.DestinationID).Msg("could not remove a delivered kept result")
	}
}

// DeliverKept delivers the results kept in the roots of dests that were
// kept more than olderThan ago and whose event busy does not name (an
// attempt of it is running), and forgets each once stored: no next
// attempt comes for an event NATS lost, so serve sweeps for them. A
// result already stored (the next attempt delivered it) is dropped by
// the events stream, or found by that attempt, so the sweep never
// reports a destination twice. It stops at the first result that cannot
// be published (NATS away: the next sweep tries again).
func (l *Ledger) DeliverKept(ctx context.Context, dests []config.Destination, olderThan time.Duration, busy func(eventID string) bool) (delivered int, err error) {
	cutoff := time.Now().Add(-olderThan)
	for _, d := range dests {
		var kept []engine.KeptResult
		err := l.withRoot(ctx, Done{Destination: d}, func(ctx context.Context, root storage.Backend) (err error) {
			kept, err = l.svc.Engine.KeptResults(ctx, root)
			return err
		})
		if err != nil {
			l.log.Warn().Err(err).Str("destination_id", d.ID).Msg("could not look for kept results")
			continue
		}
		for _, k := range kept {
			if k.Owner.DestinationID != d.ID || k.Since.After(cutoff) || busy(k.EventID) {
				continue
			}
			var r events.Result
			if err := json.Unmarshal(k.Result, &r); err != nil {
				l.log.Warn().Err(err).Str("event_id", k.EventID).Str("destination_id", d.ID).Msg("a kept result is unreadable")
				continue
			}
			dup, err := l.Publish(ctx, r)
			if err != nil {
				return delivered, fmt.Errorf("deliver the result of %s to %s kept since %s: %w", k.EventID, d.ID, k.Since.UTC().Format(time.RFC3339), err)
			}
			l.forget(ctx, Done{Destination: d}, r)
			delivered++
			l.log.Info().Str("event_id", r.BundleEventID).Str("destination_id", d.ID).Str("type", r.Type).Bool("already_stored", dup).
				Time("kept_since", k.Since).Msg("delivered a result an earlier attempt kept in the root")
		}
	}
	return delivered, nil
}

// keepTimeout bounds keeping or forgetting a result in a root.
const keepTimeout = 30 * time.Second

func (l *Ledger) withRoot(ctx context.Context, done Done, fn func(context.Context, storage.Backend) error) error {
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	root, err := l.svc.Stores.Destination(ctx, done.Destination)
	if err != nil {
		return err
	}
	return fn(ctx, root)
}

// unreported returns the destinations of dests that no earlier delivery
// of ev reported (a result event stored since since, with a minute of
// slack for clock differences inside a cluster). Running the reported
// ones again would be worse than wasted work: a transient error on the
// last delivery would contradict their result. What an earlier attempt
// kept for a reported destination (a result whose publication timed out
// but was stored) is removed.
func (l *Ledger) unreported(ctx context.Context, ev events.BundleReady, since time.Time, dests []config.Destination) ([]config.Destination, error) {
	reported, err := l.reported(ctx, ev, since)
	if err != nil {
		return nil, err
	}
	var out []config.Destination
	for _, d := range dests {
		if !reported[d.ID] {
			out = append(out, d)
			continue
		}
		l.forget(ctx, Done{Destination: d}, events.Result{BundleEventID: ev.ID, PipelineID: ev.PipelineID, DestinationID: d.ID})
	}
	return out, nil
}

// reported returns the destinations of ev with a result stored since
// since.
func (l *Ledger) reported(ctx context.Context, ev events.BundleReady, since time.Time) (map[string]bool, error) {
	since = since.Add(-time.Minute)
	oc, err := l.js.OrderedConsumer(ctx, l.subjects.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{l.subjects.ResultFilter("", "", ev.PipelineID)},
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &since,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("look up earlier results of %s: %w", ev.ID, err)
	}
	done := map[string]bool{}
	for {
		batch, err := oc.FetchNoWait(256)
		if err != nil {
			return nil, fmt.Errorf("look up earlier results of %s: %w", ev.ID, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var r struct {
				BundleEventID string `json:"bundle_event_id"`
				DestinationID string `json:"destination_id"`
			}
			if json.Unmarshal(m.Data(), &r) == nil && r.BundleEventID == ev.ID {
				done[r.DestinationID] = true
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("look up earlier results of %s: %w", ev.ID, err)
		}
		if n == 0 {
			return done, nil
		}
	}
}

// permanentPublishErr reports whether publishing a result failed for a
// reason a retry cannot change.
func permanentPublishErr(err error) bool {
	return errors.Is(err, events.ErrTooLarge) || errors.Is(err, events.ErrInvalidEvent) || errors.Is(err, nats.ErrMaxPayload)
}

// unpublished is the minimal failed result that replaces r when r cannot
// be published: it keeps r's identity and the reference to the bundle-ready
// message, so that replay still finds it.
func unpublished(r events.Result, err error, ref *events.MsgRef) events.Result {
	msg := fmt.Sprintf("could not publish the %s result event: %v", r.Type, err)
	if r.Reason != "" {
		msg += fmt.Sprintf("; it reported %s: %s", r.Reason, r.Message)
	}
	return events.Result{Type: events.TypeFailed, BundleEventID: r.BundleEventID, PipelineID: r.PipelineID, DestinationID: r.DestinationID,
		Reason: events.ReasonInternal, Message: msg, Attempts: r.Attempts, OriginalRef: ref}
}
