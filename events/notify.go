package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	subject := s.ResultFilter(TypeNotifyFailed, destination, "")
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return NotifyFailures{}, fmt.Errorf("read notify failures of %s: %w", destination, err)
	}
	var out NotifyFailures
	for _, n := range info.State.Subjects {
		out.Count += int(n)
	}
	if out.Count == 0 {
		return out, nil
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("read the last notify failure of %s: %w", destination, err)
	}
	if n, err := DecodeNotifyFailed(m.Data); err == nil {
		out.Last = &n
	}
	return out, nil
}

func encodeJSON(n NotifyFailed) ([]byte, error) {
	data, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode %s event %s: %w", n.Type, n.ID, err)
	}
	return data, nil
}
