package schematest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
)

// StreamEvent is one message of the events stream.
type StreamEvent struct {
	Subject string
	MsgID   string // the Nats-Msg-Id header
	Data    []byte
	Result  events.Result
}

// CheckEventsStream reads every message of the events stream and fails the
// test unless each one matches the schema of its type (and result.json),
// decodes, sits on the subject docs/events.md names and carries the
// documented Nats-Msg-Id.
func (s *Set) CheckEventsStream(t testing.TB, js jetstream.JetStream, subjects events.Subjects) []StreamEvent {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, subjects.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []StreamEvent
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := StreamEvent{Subject: m.Subject, MsgID: m.Header.Get(jetstream.MsgIDHeader), Data: m.Data}
		s.checkResult(t, subjects, &ev)
		out = append(out, ev)
	}
	return out
}

func (s *Set) checkResult(t testing.TB, subjects events.Subjects, ev *StreamEvent) {
	t.Helper()
	prefix := subjects.Prefix
	if prefix == "" {
		prefix = events.DefaultPrefix
	}

	// <prefix>.events.<type>.<destination or _>.<pipeline or _>
	parts := strings.SplitN(strings.TrimPrefix(ev.Subject, prefix+".events."), ".", 3)
	if len(parts) != 3 || !strings.HasPrefix(ev.Subject, prefix+".events.") {
		t.Fatalf("result event on subject %q, want %s.events.<type>.<destination>.<pipeline>", ev.Subject, prefix)
	}
	typ := parts[0]
	if typ == events.TypeNotifyFailed {
		s.checkNotifyFailed(t, ev, parts)
		return
	}
	if err := s.Validate(t, typ+".json", ev.Data); err != nil {
		t.Errorf("%s event on %s does not match docs/schema/%s.json:\n%s\n%v", typ, ev.Subject, typ, ev.Data, err)
	}
	if err := s.Validate(t, "result.json", ev.Data); err != nil {
		t.Errorf("%s event on %s does not match docs/schema/result.json:\n%s\n%v", typ, ev.Subject, ev.Data, err)
	}
	r, err := events.DecodeResult(ev.Data)
	if err != nil {
		t.Fatalf("event on %s does not decode: %v\n%s", ev.Subject, err, ev.Data)
	}
	ev.Result = r
	orUnderscore := func(s string) string {
		if s == "" {
			return "_"
		}
		return s
	}
	if r.Type != typ || orUnderscore(r.DestinationID) != parts[1] || orUnderscore(r.PipelineID) != parts[2] {
		t.Errorf("%s event %s (destination %q, pipeline %q) on subject %s", r.Type, r.ID, r.DestinationID, r.PipelineID, ev.Subject)
	}
	wantID := events.ResultMsgID(r)
	if wantID == "" {
		wantID = r.ID
	}
	if ev.MsgID != wantID || r.ID != wantID {
		t.Errorf("%s event: id %q, Nats-Msg-Id %q, want both %q", r.Type, r.ID, ev.MsgID, wantID)
	}
}

// checkNotifyFailed checks a notify_failed event: its schema, decoder,
// subject and Nats-Msg-Id.
func (s *Set) checkNotifyFailed(t testing.TB, ev *StreamEvent, parts []string) {
	t.Helper()
	if err := s.Validate(t, "notify_failed.json", ev.Data); err != nil {
		t.Errorf("notify_failed event on %s does not match docs/schema/notify_failed.json:\n%s\n%v", ev.Subject, ev.Data, err)
	}
	n, err := events.DecodeNotifyFailed(ev.Data)
	if err != nil {
		t.Fatalf("event on %s does not decode: %v\n%s", ev.Subject, err, ev.Data)
	}
	if n.DestinationID != parts[1] || ev.MsgID != n.ID || n.ID != events.NotifyFailedID(n.ResultID, n.Target) {
		t.Errorf("notify_failed event %s (destination %q) on %s with Nats-Msg-Id %q", n.ID, n.DestinationID, ev.Subject, ev.MsgID)
	}
}
