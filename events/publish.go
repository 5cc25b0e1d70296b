package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultMaxResultBytes bounds an encoded result event; NATS refuses
// messages above its max_payload (1 MiB by default).
const DefaultMaxResultBytes = 512 << 10

// ErrTooLarge: a result event does not fit the size limit even with its
// output and path lists emptied, its original left out and its message cut.
var ErrTooLarge = errors.New("result event too large")

// Publisher publishes bundle-ready and result events.
type Publisher struct {
	js       jetstream.JetStream
	subjects Subjects
	maxBytes int
	now      func() time.Time
}

// PublisherOption configures a Publisher.
type PublisherOption func(*Publisher)

// WithMaxResultBytes sets the size limit of an encoded result event
// (default DefaultMaxResultBytes).
func WithMaxResultBytes(n int) PublisherOption { return func(p *Publisher) { p.maxBytes = n } }

// WithPublisherClock replaces time.Now for the times the publisher fills in.
func WithPublisherClock(now func() time.Time) PublisherOption {
	return func(p *Publisher) { p.now = now }
}

// NewPublisher returns a publisher for the streams named by subjects (see
// Setup).
func NewPublisher(js jetstream.JetStream, subjects Subjects, opts ...PublisherOption) *Publisher {
	p := &Publisher{js: js, subjects: subjects, maxBytes: DefaultMaxResultBytes, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// ErrOperatorFlags: a producer's bundle-ready event carries an operator
// flag (take_ownership, allow_older, delete_later) or field (rollback_of).
var ErrOperatorFlags = errors.New("operator flags on a producer's event")

// AnnounceBundle publishes a bundle-ready event: the call a producer makes
// once a bundle (files + manifest.json) is complete. Zero SchemaVersion and
// Type, an empty ID (a NewEventID) and a zero ProducedAt (now) are filled
// in; set ID yourself to know it or to retry safely. The event id is the
// Nats-Msg-Id, so announcing the same id again within the dedup window
// stores nothing and reports dup = true with the first sequence. An event
// with TakeOwnership, AllowOlder, RollbackOf or DeleteLater is refused
// (ErrOperatorFlags): those are operator requests, see AnnounceAsOperator.
func (p *Publisher) AnnounceBundle(ctx context.Context, ev BundleReady) (seq uint64, dup bool, err error) {
	if ev.TakeOwnership || ev.AllowOlder || ev.RollbackOf != "" || ev.DeleteLater {
		return 0, false, fmt.Errorf("%w: announce bundle %s: take_ownership, allow_older, rollback_of and delete_later are operator fields, accepted only on %s (distributor replay --take-ownership / --allow-older, distributor rollback)",
			ErrOperatorFlags, ev.Bundle, p.subjects.AdminBundleReadyFilter(""))
	}
	return p.announce(ctx, p.subjects.BundleReady(ev.PipelineID), ev)
}

// AnnounceAsOperator publishes a bundle-ready event on the admin subject
// (AdminBundleReady), the only place where its operator flags are honoured.
// NATS permissions keep producers off that subject. It fills in and
// deduplicates like AnnounceBundle.
func (p *Publisher) AnnounceAsOperator(ctx context.Context, ev BundleReady) (seq uint64, dup bool, err error) {
	return p.announce(ctx, p.subjects.AdminBundleReady(ev.PipelineID), ev)
}

func (p *Publisher) announce(ctx context.Context, subject string, ev BundleReady) (seq uint64, dup bool, err error) {
	if ev.SchemaVersion == 0 {
		ev.SchemaVersion = SchemaVersion
	}
	if ev.Type == "" {
		ev.Type = TypeBundleReady
	}
	if ev.ID == "" {
		ev.ID = NewEventID()
	}
	if ev.ProducedAt.IsZero() {
		ev.ProducedAt = p.now().UTC()
	}
	if err := ev.Validate(); err != nil {
		return 0, false, err
	}
	data, err := ev.Encode()
	if err != nil {
		return 0, false, fmt.Errorf("encode bundle.ready %s: %w", ev.ID, err)
	}
	if err := checkEventSize(len(data)); err != nil {
		return 0, false, err
	}
	stream := p.subjects.BundlesStream()
	deadline := time.Now().Add(electionWait)
	answered := false
	for {
		ack, err := p.js.Publish(ctx, subject, data,
			jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(stream))
		if err == nil {
			return ack.Sequence, ack.Duplicate, nil
		}
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || !time.Now().Before(deadline) {
			return 0, false, p.publishErr(ctx, "announce bundle "+ev.ID, stream, err)
		}

		// Retried with the same message id (a publish stored after all is a
		// duplicate, not a second event) while the stream exists and has no
		// leader; once it answers with one, a last attempt decides.
		switch leader := p.streamAnswers(ctx, stream); {
		case errors.Is(leader, jetstream.ErrStreamNotFound), leader == nil && answered:
			return 0, false, p.publishErr(ctx, "announce bundle "+ev.ID, stream, err)
		case leader == nil:
			answered = true
			continue
		}
		select {
		case <-ctx.Done():
			return 0, false, p.publishErr(ctx, "announce bundle "+ev.ID, stream, err)
		case <-time.After(electionPause):
		}
	}
}

// electionWait bounds how long an announce waits for the bundle stream
// to elect a leader (a fresh or recovering cluster): an election takes
// seconds, and a producer would otherwise have to retry it itself.
// electionPause is the pause between attempts.
const (
	electionWait  = 30 * time.Second
	electionPause = 250 * time.Millisecond
)

// streamAnswers asks for stream's info: nil when its leader answers,
// jetstream.ErrStreamNotFound when it does not exist, another error
// (a time-out) while it has no leader.
func (p *Publisher) streamAnswers(ctx context.Context, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := p.js.Stream(ctx, stream)
	return err
}

// PublishResult publishes a result event. Zero SchemaVersion and Time are
// filled in. A publication result (published, superseded, collision, failed
// with a BundleEventID) gets the deterministic Nats-Msg-Id ResultMsgID, also
// used as its ID when ID is empty: the events stream stores one result per
// (bundle event, destination) within its dedup window, whatever its type,
// and dup reports that an earlier one is stored (this one was not). Other
// results use ID (a NewEventID when empty). Outputs, then the path lists
// are cut, then the original is left out (when OriginalRef names it), then
// the message is cut to keep the event under the size limit: the smaller
// of the publisher's (WithMaxResultBytes) and what the server accepts.
func (p *Publisher) PublishResult(ctx context.Context, r Result) (dup bool, err error) {
	if r.SchemaVersion == 0 {
		r.SchemaVersion = SchemaVersion
	}
	if r.Time.IsZero() {
		r.Time = p.now().UTC()
	}
	msgID := ResultMsgID(r)
	if r.ID == "" {
		r.ID = msgID
		if r.ID == "" {
			r.ID = NewEventID()
		}
	}
	if msgID == "" {
		msgID = r.ID
	}
	if err := r.Validate(); err != nil {
		return false, err
	}
	data, err := fitResult(r, p.limit())
	if err != nil {
		return false, err
	}
	stream := p.subjects.EventsStream()
	subject := p.subjects.Result(r.Type, r.DestinationID, r.PipelineID)
	ask := time.Now().Add(inProcessWait)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		ack, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(stream))
		if err == nil {
			return ack.Duplicate, nil
		}
		if !duplicateInProcess(err) || time.Now().Add(pause).After(ask) {
			return false, p.publishErr(ctx, "publish "+r.Type+" event "+r.ID, stream, err)
		}
		select {
		case <-ctx.Done():
			return false, p.publishErr(ctx, "publish "+r.Type+" event "+r.ID, stream, err)
		case <-time.After(pause):
		}
	}
}

// inProcessWait bounds how long PublishResult asks again while another
// publish of the same result is being stored.
const inProcessWait = 5 * time.Second

// duplicateInProcess: a clustered stream is storing a message with the
// same id right now (another attempt of the event publishing the same
// result); asked again once that one is stored, it answers duplicate.
func duplicateInProcess(err error) bool {
	const code = 10158 // the server's JSStreamDuplicateMessageConflict
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == code
}

// headerRoom is what a result's headers and subject take of the server's
// max_payload, which bounds a message's headers and data together.
const headerRoom = 1 << 10

// limit is the largest encoded result event to publish: the publisher's
// limit, or less when the server's max_payload is smaller.
func (p *Publisher) limit() int {
	limit := p.maxBytes
	if nc := p.js.Conn(); nc != nil {
		if server := int(nc.MaxPayload()) - headerRoom; server > 0 && server < limit {
			limit = server
		}
	}
	return limit
}

// ResultMsgID is the deterministic Nats-Msg-Id of a publication result,
// "<bundle_event_id>.<destination_id or _>", or "" for results not tied to a
// bundle event. It does not depend on the result's type: a second result
// for the same destination of the same event, of whichever type, is a
// duplicate the stream drops.
func ResultMsgID(r Result) string {
	switch r.Type {
	case TypePublished, TypeSuperseded, TypeCollision, TypeFailed:
		if r.BundleEventID != "" {
			return r.BundleEventID + "." + orUnderscore(r.DestinationID)
		}
	}
	return ""
}

// publishErr says why a publish to stream failed. No answer from the
// stream, or none in time, means it does not exist, or it exists without
// a leader (a NATS cluster that lost its quorum): asked directly, the
// server tells which.
func (p *Publisher) publishErr(ctx context.Context, what, stream string, err error) error {
	noAnswer := errors.Is(err, jetstream.ErrNoStreamResponse)
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
	if !noAnswer && !timedOut {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, serr := p.js.Stream(ctx, stream)
	switch {
	case errors.Is(serr, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%s: stream %s does not exist: start distributor serve once (it creates the streams): %w", what, stream, err)
	case serr == nil && timedOut:
		return fmt.Errorf("%s: %w", what, err) // the stream answers: the publish was only slow
	}
	why := "no JetStream leader answers for it (a NATS cluster without quorum, or a leader election under way)"
	if serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		why = "the server says: " + serr.Error()
	}
	return fmt.Errorf("%s: stream %s does not answer: %s: %w", what, stream, why, err)
}

// fitResult encodes r within limit bytes: it keeps as many outputs as fit
// (OutputsTruncated), then as many path-list entries as fit (ListsTruncated),
// then leaves out an Original that OriginalRef names, then keeps as much of
// the message as fits.
func fitResult(r Result, limit int) ([]byte, error) {
	outputs := &encodedOutputs{list: r.Outputs}
	data, fits, err := outputs.whole(r, limit)
	if err != nil {
		return nil, fmt.Errorf("encode %s event %s: %w", r.Type, r.ID, err)
	}
	if fits {
		return data, nil
	}
	if len(r.Outputs) > 0 {
		r.OutputsTruncated = true
		if data, ok := outputs.fit(r, limit); ok {
			return data, nil
		}
		r.Outputs = nil
	}
	n := max(len(r.Collisions), len(r.Adopted), len(r.SizeMismatches))
	if n > 0 {
		col, ad, sm := r.Collisions, r.Adopted, r.SizeMismatches
		r.ListsTruncated = true
		if data, ok := largestFit(n, limit, func(k int) Result {
			r.Collisions, r.Adopted, r.SizeMismatches = col[:min(k, len(col))], ad[:min(k, len(ad))], sm[:min(k, len(sm))]
			return r
		}); ok {
			return data, nil
		}
	}
	if r.Original != nil && r.OriginalRef != nil {
		r.Original = nil
		if data, err := json.Marshal(r); err == nil && len(data) <= limit {
			return data, nil
		}
	}
	if msg := r.Message; msg != "" {
		if data, ok := largestFit(len(msg), limit, func(k int) Result { r.Message = cutMessage(msg, k); return r }); ok {
			return data, nil
		}
	}
	return nil, fmt.Errorf("%w: %s event %s exceeds %d bytes even without outputs, path lists, original and message", ErrTooLarge, r.Type, r.ID, limit)
}

// cutMessage is the first n bytes of msg (at a character boundary) marked
// as cut.
func cutMessage(msg string, n int) string {
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + truncatedMark
}

// truncatedMark ends a message cut to fit the size limit.
const truncatedMark = " … (truncated)"

// encodedOutputs measures a result's encoding by its outputs without
// encoding it whole: with k ≥ 1 outputs it is the encoding with the first
// alone plus, for each further output, that output's own encoding's
// length (OutputRef.encodedLen) and a comma. Each output is measured once,
// at most, and only as far as the limit reaches, where probes would encode
// the whole result once each. An encoding the sum does not match is left
// to the probes.
type encodedOutputs struct {
	list []OutputRef
	lens []int // the encodings' lengths measured so far, from list[1]
}

// prefix returns the largest k in [1, len(list)] whose encoding of r
// with the first k outputs fits limit and that encoding's size, or k = 0
// when even one output does not fit.
func (e *encodedOutputs) prefix(r Result, limit int) (k, size int, err error) {
	r.Outputs = e.list[:1:1]
	one, err := json.Marshal(r)
	if err != nil || len(one) > limit {
		return 0, 0, err
	}
	k, size = 1, len(one)
	for ; k < len(e.list); k++ {
		if k > len(e.lens) {
			e.lens = append(e.lens, e.list[k].encodedLen())
		}
		if size+e.lens[k-1]+1 > limit {
			break
		}
		size += e.lens[k-1] + 1
	}
	return k, size, nil
}

// whole encodes r, and says whether it fits limit; over the limit it
// need not return the encoding. Outputs whose shortest encodings alone
// pass the limit do not fit without one: most results fit, and are
// encoded once.
func (e *encodedOutputs) whole(r Result, limit int) ([]byte, bool, error) {
	if e.atLeast() > limit {
		return nil, false, nil
	}
	data, err := json.Marshal(r)
	return data, err == nil && len(data) <= limit, err
}

// atLeast is a lower bound of the outputs' encoding in a result: each
// output's strings unescaped, its path and action keys, and the commas.
func (e *encodedOutputs) atLeast() int {
	n := max(len(e.list)-1, 0)
	for _, o := range e.list {
		n += len(`{"path":"","action":""}`) + len(o.Path) + len(o.SHA256) + len(o.URL) + len(o.Action)
	}
	return n
}

// fit is largestFit over r's first k outputs.
func (e *encodedOutputs) fit(r Result, limit int) ([]byte, bool) {
	with := func(k int) Result { r.Outputs = e.list[:k:k]; return r }
	if k, size, err := e.prefix(r, limit); err == nil && k > 0 && k < len(e.list) {
		if data, err := json.Marshal(with(k)); err == nil && len(data) == size {
			return data, true
		}
	}
	return largestFit(len(e.list), limit, with)
}

// largestFit finds the largest k in [0, n) whose encoding of with(k) fits
// limit (encoded size grows with k).
func largestFit(n, limit int, with func(k int) Result) ([]byte, bool) {
	size := func(k int) int {
		d, _ := json.Marshal(with(k))
		return len(d)
	}

	// First k that does not fit; n itself is known not to fit.
	k := sort.Search(n, func(k int) bool { return size(k) > limit })
	if k == 0 {
		return nil, false
	}
	data, _ := json.Marshal(with(k - 1))
	return data, true
}
