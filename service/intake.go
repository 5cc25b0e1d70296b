package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/events"
)

// Arrival is a bundle-ready message as it was delivered: its event
// decoded (or why not) and, when its destinations are known, its places
// in their roots' lines (Service.Queue).
type Arrival struct {
	ev     events.BundleReady
	err    error // the message is no bundle-ready event
	places *Places
}

// Arrive decodes data, a bundle-ready message, and takes its event's
// places: called in delivery order, it makes this process publish into
// each root in that order. Its publications run within running (nil: no
// bound), each once its root's turn comes. The arrival is handed to
// Handle, or given up with Release.
func (l *Ledger) Arrive(data []byte, running *Running) *Arrival {
	a := &Arrival{}
	if a.ev, a.err = events.DecodeBundleReady(data); a.err != nil {
		return a
	}
	if dests, err := l.svc.Destinations(RequestFor(a.ev)); err == nil {
		a.places = l.svc.Queue(dests)
		a.places.running = running
	}
	return a
}

// EventID is the arrived event's id; "" when the message is no
// bundle-ready event.
func (a *Arrival) EventID() string {
	if a.err != nil {
		return ""
	}
	return a.ev.ID
}

// Release gives up the places of an arrival that is not handled.
func (a *Arrival) Release(ctx context.Context) { a.places.Release(ctx) }

// Message is one delivery of an arrived message, as the consumer has it.
type Message struct {
	// Subject is the subject the message came on: its pipeline is the one
	// the sender may announce for, and only the admin subject may carry
	// operator flags.
	Subject string

	// Attempt numbers the delivery, from 1; Last: no delivery follows it.
	Attempt int
	Last    bool

	// StoredAt is when the stream stored the message; zero when unknown.
	StoredAt time.Time

	// Ref names the message in its stream; nil when unknown.
	Ref *events.MsgRef

	// RetryDelay is how long a Nak delays the next delivery (the logs say
	// it).
	RetryDelay time.Duration
}

// Verdict is what becomes of a handled message.
type Verdict int

const (
	// Ack: every destination of the event is reported.
	Ack Verdict = iota

	// Nak: deliver the message again after its back-off; a destination
	// is retried, or its result delivered, then.
	Nak

	// Term: never deliver the message again. It is refused (with one
	// failed/invalid_event result), or a result could not be published
	// (replaced by a minimal failed one): none stays unacknowledged.
	Term
)

// Answer is what Handle came to: the verdict on the message and what
// became of its destinations.
type Answer struct {
	Verdict Verdict

	// Why is a Term's reason.
	Why string

	// Reports are the outcomes this delivery retried or reported; an
	// outcome an earlier delivery reported already, or whose result waits
	// for a later delivery, has none.
	Reports []Report
}

// Report is what one destination of an event came to in one delivery.
type Report struct {
	// Destination is the destination id; "" when the event failed as a
	// whole (an unknown pipeline, an undecodable or refused event).
	Destination string

	// Retried: a transient failure, retried by the next delivery; Type and
	// Reason are empty.
	Retried bool

	// Type and Reason are the reported result event's.
	Type, Reason string

	// Took is how long the publication ran; 0 when none ran.
	Took time.Duration

	// Result is what the engine did; Err is the publication's error.
	Result Result
	Err    error
}

// outcome is what happened to one destination of an event; a zero
// Destination when the event failed as a whole.
type outcome struct {
	Done
	transient bool
}

// logFields adds the destination, its root and the lease token, when known.
func (o outcome) logFields(e *zerolog.Event) *zerolog.Event {
	if o.Destination.ID != "" {
		e = e.Str("destination_id", o.Destination.ID)
		if k := o.Destination.RootKey(); k != "" {
			e = e.Str("root", k)
		}
	}
	if o.Result.LeaseToken != "" {
		e = e.Str("lease_token", o.Result.LeaseToken)
	}
	return e
}

// Handle handles one delivery of an arrived bundle-ready message to its
// end and says what to acknowledge. It is where `serve` reports each
// destination of an event once: it refuses a message that is no event, or
// not one its subject may carry; on a redelivery it runs only the
// destinations that no earlier delivery reported; it publishes the rest
// (Service.Publish), classifies each outcome (Classify), and delivers its
// result event, or the one an earlier attempt kept (Deliver). Work
// abandoned because ctx ended is retried, never reported, unless the
// delivery is the last. Handle gives up the arrival's unused places.
func (l *Ledger) Handle(ctx context.Context, a *Arrival, m Message) Answer {
	defer a.places.Release(ctx)
	if a.err != nil {
		return l.refuseUndecodable(ctx, a.err, m)
	}
	ev := a.ev
	log := l.log.With().Str("event_id", ev.ID).Str("pipeline_id", ev.PipelineID).Int("attempt", m.Attempt).Logger()

	// The engine's lines about this event carry the same fields.
	ctx = log.WithContext(ctx)
	if p, ok := l.subjects.BundleReadyPipeline(m.Subject); !ok || p != ev.PipelineID {
		return l.rejectOtherPipeline(ctx, ev, p, m)
	}
	if !l.subjects.IsAdmin(m.Subject) && (ev.TakeOwnership || ev.AllowOlder) {
		return l.rejectOperatorFlags(ctx, ev, m)
	}

	outs := l.run(ctx, ev, a.places, m)

	// Work abandoned at shutdown fails with whatever the cancellation
	// caused: retry it rather than report it.
	abandoned := ctx.Err() != nil
	retry, unpublishable := false, false
	var reports []Report
	for _, o := range outs {
		if o.Err != nil && (o.transient || abandoned) && !m.Last {
			retry = true
			o.logFields(log.Warn().Err(o.Err)).Str("next_delay", m.RetryDelay.String()).Msg("transient failure; will retry")
			reports = append(reports, Report{Destination: o.Destination.ID, Retried: true, Took: o.Took, Result: o.Result, Err: o.Err})
			continue
		}
		status, rep := l.report(ctx, log, ev, o, m)
		switch status {
		case Retry:
			retry = true
		case Undeliverable:
			unpublishable = true
		case Delivered:
			reports = append(reports, rep)
		}
	}
	switch {
	case retry:
		return Answer{Verdict: Nak, Reports: reports}
	case unpublishable:
		// Never left pending: a nak on the last delivery would keep the
		// message unacknowledged forever.
		return Answer{Verdict: Term, Why: "result event could not be published", Reports: reports}
	}
	return Answer{Verdict: Ack, Reports: reports}
}

// run publishes the event to its destinations that no earlier delivery
// reported, concurrently, each under its own root lease; destinations
// sharing a root serialise on that lease.
func (l *Ledger) run(ctx context.Context, ev events.BundleReady, places *Places, m Message) []outcome {
	req := RequestFor(ev)
	req.Places, req.StoredAt = places, m.StoredAt
	dests, err := l.svc.Destinations(req)
	if err != nil {
		return []outcome{{Done: Done{Err: err}}}
	}
	if m.Attempt > 1 {
		places.deliveredAgain()
		if dests, err = l.unreported(ctx, ev, m.StoredAt, dests); err != nil {
			return []outcome{{Done: Done{Err: err}, transient: true}}
		}
		places.Keep(ctx, dests) // the reported ones' roots move on
		if len(dests) == 0 {
			return nil
		}
	}
	_, done := l.svc.Publish(ctx, req, dests)
	outs := make([]outcome, len(done))
	for i, d := range done {
		outs[i] = outcome{Done: d, transient: Classify(d.Err).Retry}
	}
	return outs
}

// report delivers the result event of one final outcome, logs it, and
// says what became of it, with the outcome's report when it was
// delivered.
func (l *Ledger) report(ctx context.Context, log zerolog.Logger, ev events.BundleReady, o outcome, m Message) (Status, Report) {
	r := l.ResultFor(o.Done, Delivery{Event: ev, Attempt: m.Attempt, Exhausted: o.transient && m.Last})
	if r.Original != nil {
		r.OriginalRef = m.Ref // lets a result too large for its original still name it
	}
	status := l.Deliver(ctx, o.Done, r, m.Last, m.Ref)
	switch status {
	case AlreadyReported:
		o.logFields(log.Info()).Str("type", r.Type).Msg("an earlier delivery reported this destination already; this result is dropped")
		return status, Report{}
	case Retry, Undeliverable:
		return status, Report{}
	}

	// A failure needs an operator.
	le := log.Info()
	if r.Type == events.TypeFailed {
		le = log.Error().AnErr("error", o.Err)
	}
	le = o.logFields(le).Str("type", r.Type).Int("written", r.Written).Int("deleted", r.Deleted)
	if r.Reason != "" {
		le = le.Str("reason", r.Reason)
	}
	if o.Result.Kept != nil {
		le = le.Bool("kept_by_an_earlier_attempt", true)
	}
	le.Msg("result")
	return status, Report{Destination: o.Destination.ID, Type: r.Type, Reason: r.Reason, Took: o.Took, Result: o.Result, Err: o.Err}
}

// refuse delivers r, the one result of a message that is refused as a
// whole, and terminates the message (why); it naks it instead when the
// result could not be published and a later delivery may manage.
func (l *Ledger) refuse(ctx context.Context, r events.Result, m Message, why string) Answer {
	if l.Deliver(ctx, Done{}, r, m.Last, m.Ref) == Retry {
		return Answer{Verdict: Nak}
	}
	return Answer{Verdict: Term, Why: why, Reports: []Report{{Type: events.TypeFailed, Reason: events.ReasonInvalidEvent}}}
}

// refuseUndecodable refuses a message that is no bundle-ready event.
func (l *Ledger) refuseUndecodable(ctx context.Context, err error, m Message) Answer {
	l.log.Warn().Err(err).Str("subject", m.Subject).Int("attempt", m.Attempt).Msg("undecodable bundle-ready event")
	id := "unknown"
	if m.Ref != nil {
		id = fmt.Sprintf("%s.%d", m.Ref.Stream, m.Ref.Seq)
	}
	r := events.Result{Type: events.TypeFailed, ID: "invalid." + id, Reason: events.ReasonInvalidEvent, Message: err.Error(), Attempts: m.Attempt}
	// Nothing names the message but the result's id.
	m.Ref = nil
	return l.refuse(ctx, r, m, "invalid event")
}

// rejectOperatorFlags refuses a producer's event that asks for what only
// an operator may (adoption, roll back). Its original is kept, so an
// operator can grant it with replay.
func (l *Ledger) rejectOperatorFlags(ctx context.Context, ev events.BundleReady, m Message) Answer {
	var flags []string
	if ev.TakeOwnership {
		flags = append(flags, "take_ownership")
	}
	if ev.AllowOlder {
		flags = append(flags, "allow_older")
	}
	orig := ev
	r := events.Result{Type: events.TypeFailed, BundleEventID: ev.ID, PipelineID: ev.PipelineID, Reason: events.ReasonInvalidEvent,
		Message: fmt.Sprintf("bundle.ready %s on %s asks for %s: operator flags are accepted only on the admin subject %s (distributor replay --take-ownership or --allow-older)",
			ev.ID, m.Subject, strings.Join(flags, " and "), l.subjects.AdminBundleReady(ev.PipelineID)),
		Attempts: m.Attempt, Original: &orig}
	l.log.Warn().Str("event_id", ev.ID).Str("pipeline_id", ev.PipelineID).Int("attempt", m.Attempt).Str("subject", m.Subject).Strs("flags", flags).
		Msg("operator flags on a producer subject; rejected")
	return l.refuse(ctx, r, m, "operator flags on a producer subject")
}

// rejectOtherPipeline refuses an event whose pipeline_id is not the
// pipeline of the subject it came on (producer or admin), before anything
// is read. NATS permissions are granted per subject, so the subject's
// pipeline is the one the sender may announce for: the result is reported
// there, not to the pipeline the event claims. Its original is kept, so
// an operator can grant it with replay.
func (l *Ledger) rejectOtherPipeline(ctx context.Context, ev events.BundleReady, subjectPipeline string, m Message) Answer {
	orig := ev
	r := events.Result{Type: events.TypeFailed, BundleEventID: ev.ID, PipelineID: subjectPipeline, Reason: events.ReasonInvalidEvent,
		Message: fmt.Sprintf("bundle.ready %s on %s is for pipeline %q, but the subject is pipeline %q's: announce a pipeline's bundles on its own subject, %s",
			ev.ID, m.Subject, ev.PipelineID, subjectPipeline, l.subjects.BundleReady(ev.PipelineID)),
		Attempts: m.Attempt, Original: &orig}
	l.log.Warn().Str("event_id", ev.ID).Str("pipeline_id", ev.PipelineID).Int("attempt", m.Attempt).Str("subject", m.Subject).
		Msg("pipeline_id is not the subject's pipeline; rejected")
	return l.refuse(ctx, r, m, "pipeline_id is not the subject's pipeline")
}
