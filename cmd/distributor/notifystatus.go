package main

// Notify failures in status, the status page and history: how many
// notify_failed events the events stream keeps of a destination, the
// newest, and the command that sends its result again.

import (
	"context"
	"fmt"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
)

// notifyFailuresJSON counts a destination's notify_failed events in the
// events stream and names the newest.
type notifyFailuresJSON struct {
	Count int                `json:"count"`
	Last  *notifyFailureJSON `json:"last,omitempty"`
}

// notifyFailureJSON is one notify_failed event: the result a target gave
// up on, and why.
type notifyFailureJSON struct {
	Time       time.Time `json:"time"`
	EventID    string    `json:"event_id"`
	ResultID   string    `json:"result_id"`
	ResultType string    `json:"result_type"`
	PipelineID string    `json:"pipeline_id,omitempty"`
	Target     string    `json:"target"`
	TargetType string    `json:"target_type"`
	Attempts   int       `json:"attempts"`
	Message    string    `json:"message"`

	// Replay is the command that sends the result again.
	Replay string `json:"replay"`
}

// toNotifyFailures is what the report says of f: nil when there is none.
func toNotifyFailures(f events.NotifyFailures) *notifyFailuresJSON {
	if f.Count == 0 {
		return nil
	}
	out := &notifyFailuresJSON{Count: f.Count}
	if n := f.Last; n != nil {
		out.Last = &notifyFailureJSON{Time: n.Time.UTC(), EventID: n.ID, ResultID: n.ResultID, ResultType: n.ResultType, PipelineID: n.PipelineID,
			Target: n.Target, TargetType: n.TargetType, Attempts: n.Attempts, Message: n.Message, Replay: replayCommand(n.ResultID, n.Target)}
	}
	return out
}

// replayCommand is the command that sends result id to target again.
func replayCommand(resultID, target string) string {
	return "distributor notify replay --id " + resultID + " --target " + target
}

// readNotifyFailures reads the notify failures of every destination (of
// pipeline, unless it is ""), with one request for the counts and one per
// destination that has any.
func readNotifyFailures(ctx context.Context, streams *events.Streams, pipeline string) (map[string]*notifyFailuresJSON, error) {
	all, err := events.ReadNotifyFailuresByDestination(ctx, streams.Events, streams.Subjects, pipeline)
	out := make(map[string]*notifyFailuresJSON, len(all))
	for dest, f := range all {
		out[dest] = toNotifyFailures(f)
	}
	return out, err
}

// notifyFailuresText is the notify failures on one line for a terminal,
// with the command that sends the newest again.
func notifyFailuresText(f *notifyFailuresJSON) string {
	if f == nil {
		return "none in the events stream"
	}
	s := fmt.Sprintf("%d in the events stream", f.Count)
	if l := f.Last; l != nil {
		s += fmt.Sprintf("; newest %s: %s target %s gave up on %s result %s after %d attempt(s): %s; send it again: %s",
			catalog.FormatTime(l.Time), l.TargetType, l.Target, l.ResultType, l.ResultID, l.Attempts, l.Message, l.Replay)
	}
	return escapeControl(s)
}
