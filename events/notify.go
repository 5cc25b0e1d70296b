package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TypeNotifyFailed is the event of a notify delivery given up.
const TypeNotifyFailed = "notify_failed"

// NotifyFailed reports that a result could not be delivered to one notify
// target of its destination within the target's max_age. It is not a
// result event: readers of results skip it.
type NotifyFailed struct {
	SchemaVersion int       `json:"schema_version"`
	Type          string    `json:"type"`
	ID            string    `json:"id"`
	Time          time.Time `json:"time"`

	// ResultID and ResultType name the result that was not delivered
	// (`distributor notify replay --id` sends it again).
	ResultID      string `json:"result_id"`
	ResultType    string `json:"result_type"`
	PipelineID    string `json:"pipeline_id,omitempty"`
	DestinationID string `json:"destination_id"`

	// Target is the target's name, TargetType its type.
	Target     string `json:"target"`
	TargetType string `json:"target_type"`

	// Attempts made, and the last one's error.
	Attempts int    `json:"attempts"`
	Message  string `json:"message"`
}

// NotifyFailedID is the id (and Nats-Msg-Id) of the notify_failed event of
// a result and target: "<result id>.notify.<target>", so that a give-up
// reported twice is stored once.
func NotifyFailedID(resultID, target string) string { return resultID + ".notify." + target }

// Validate checks a notify_failed event as DecodeNotifyFailed does.
func (n NotifyFailed) Validate() error {
	switch {
	case n.SchemaVersion != SchemaVersion:
		return invalid(TypeNotifyFailed, "schema_version %d is not supported (want %d)", n.SchemaVersion, SchemaVersion)
	case n.Type != TypeNotifyFailed:
		return invalid(TypeNotifyFailed, "type is %q, want %q", n.Type, TypeNotifyFailed)
	case n.ID == "" || !printable(n.ID):
		return invalid(TypeNotifyFailed, "id %q is empty or contains whitespace or control characters", n.ID)
	case n.Time.IsZero():
		return invalid(TypeNotifyFailed+" "+n.ID, "time is missing")
	case n.ResultID == "" || !printable(n.ResultID):
		return invalid(TypeNotifyFailed+" "+n.ID, "result_id %q is empty or contains whitespace or control characters", n.ResultID)
	case n.DestinationID == "" || n.Target == "" || n.TargetType == "":
		return invalid(TypeNotifyFailed+" "+n.ID, "destination_id, target and target_type must not be empty")
	}
	return nil
}

// DecodeNotifyFailed strictly decodes a notify_failed event; errors wrap
// ErrInvalidEvent.
func DecodeNotifyFailed(data []byte) (NotifyFailed, error) {
	var n NotifyFailed
	if err := decodeStrict(data, &n); err != nil {
		return NotifyFailed{}, fmt.Errorf("%w: %s: %v", ErrInvalidEvent, TypeNotifyFailed, err)
	}
	return n, n.Validate()
}

// PublishNotifyFailed publishes a notify_failed event on
// <prefix>.events.notify_failed.<destination>.<pipeline or _>. Zero
// SchemaVersion, Type, ID (NotifyFailedID) and Time are filled in.
func (p *Publisher) PublishNotifyFailed(ctx context.Context, n NotifyFailed) error {
	if n.SchemaVersion == 0 {
		n.SchemaVersion = SchemaVersion
	}
	n.Type = TypeNotifyFailed
	if n.ID == "" {
		n.ID = NotifyFailedID(n.ResultID, n.Target)
	}
	if n.Time.IsZero() {
		n.Time = p.now().UTC()
	}
	if len(n.Message) > maxNotifyMessage {
		n.Message = cutMessage(n.Message, maxNotifyMessage)
	}
	if err := n.Validate(); err != nil {
		return err
	}
	data, err := encodeJSON(n)
	if err != nil {
		return err
	}
	stream := p.subjects.EventsStream()
	_, err = p.js.Publish(ctx, p.subjects.Result(TypeNotifyFailed, n.DestinationID, n.PipelineID), data,
		jetstream.WithMsgID(n.ID), jetstream.WithExpectStream(stream))
	if err != nil {
		return p.publishErr(ctx, "publish notify_failed event "+n.ID, stream, err)
	}
	return nil
}

// maxNotifyMessage bounds the error message a notify_failed event keeps.
const maxNotifyMessage = 4096

// NotifyFailures is what the events stream holds of a destination's
// notify_failed events: how many, and the newest.
type NotifyFailures struct {
	Count int
	Last  *NotifyFailed
}

// ReadNotifyFailures counts destination's notify_failed events in the
// events stream and returns the newest.
func ReadNotifyFailures(ctx context.Context, st jetstream.Stream, s Subjects, destination string) (NotifyFailures, error) {
	all, err := readNotifyFailures(ctx, st, s, s.ResultFilter(TypeNotifyFailed, destination, ""))
	return all[destination], err
}

// ReadNotifyFailuresByDestination counts the notify_failed events in the
// events stream per destination (of pipeline only, unless it is "") and
// returns each destination's newest. Destinations without any are absent.
func ReadNotifyFailuresByDestination(ctx context.Context, st jetstream.Stream, s Subjects, pipeline string) (map[string]NotifyFailures, error) {
	return readNotifyFailures(ctx, st, s, s.ResultFilter(TypeNotifyFailed, "", pipeline))
}

// readNotifyFailures reads the subjects matching filter with one stream
// info request, then the newest event of each destination found.
func readNotifyFailures(ctx context.Context, st jetstream.Stream, s Subjects, filter string) (map[string]NotifyFailures, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("read notify failures: %w", err)
	}
	out := map[string]NotifyFailures{}
	head := s.prefix() + ".events." + TypeNotifyFailed + "."
	for subject, n := range info.State.Subjects {
		rest, ok := strings.CutPrefix(subject, head)
		if !ok || n == 0 {
			continue
		}
		dest, _, _ := strings.Cut(rest, ".")
		f := out[dest]
		f.Count += int(n)
		out[dest] = f
	}
	for dest, f := range out {
		last, err := lastNotifyFailure(ctx, st, destFilter(s, filter, dest))
		if err != nil {
			return out, fmt.Errorf("read the last notify failure of %s: %w", dest, err)
		}
		f.Last = last
		out[dest] = f
	}
	return out, nil
}

// destFilter narrows filter (a ResultFilter of notify_failed events) to
// destination dest.
func destFilter(s Subjects, filter, dest string) string {
	head := s.prefix() + ".events." + TypeNotifyFailed + "."
	rest := strings.TrimPrefix(filter, head)
	_, pipeline, _ := strings.Cut(rest, ".")
	return head + dest + "." + pipeline
}

// lastNotifyFailure is the newest notify_failed event on subject, or nil
// when there is none or it does not decode.
func lastNotifyFailure(ctx context.Context, st jetstream.Stream, subject string) (*NotifyFailed, error) {
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if n, err := DecodeNotifyFailed(m.Data); err == nil {
		return &n, nil
	}
	return nil, nil // not one of ours: counted, not shown
}

func encodeJSON(n NotifyFailed) ([]byte, error) {
	data, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode %s event %s: %w", n.Type, n.ID, err)
	}
	return data, nil
}
