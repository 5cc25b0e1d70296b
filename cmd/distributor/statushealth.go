package main

// A destination's health in one line (status and the status page): what
// the events stream says of its results, whether it looks pinned, whether
// its root is locked; and the failures that belong to no destination.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// pinnedAfterSuperseded is how many superseded results after the last
// publication mark a destination as pinned: one is an older bundle
// delivered late, more is a live version that keeps winning.
const pinnedAfterSuperseded = 2

// recentWithoutDestination is how many failures without a destination
// the report lists (newest first); it counts them all.
const recentWithoutDestination = 10

// summaryJSON is a destination's health: its results in the events stream,
// whether it looks pinned, whether a live holder has its root.
type summaryJSON struct {
	// Results counts the destination's results the events stream keeps;
	// absent when NATS is not known.
	Results *resultCountsJSON `json:"results,omitempty"`

	// LastFailureStale: a publication succeeded after the last failure.
	LastFailureStale bool `json:"last_failure_stale,omitempty"`

	// Pinned says why newer versions do not become live: the live source
	// was created in the future, or versions keep being superseded.
	Pinned string `json:"pinned,omitempty"`

	// Locked: a live holder has the root's lease or lock object.
	Locked bool `json:"locked"`
}

// resultCountsJSON counts one destination's results in the events stream.
type resultCountsJSON struct {
	Published int `json:"published"`

	// Failed counts failed and collision results; Failing those after the
	// last publication.
	Failed  int `json:"failed"`
	Failing int `json:"failing"`

	// Superseded counts superseded results; SupersededSincePublished those
	// after the last publication.
	Superseded               int `json:"superseded"`
	SupersededSincePublished int `json:"superseded_since_published"`
}

// withoutDestinationJSON are the failed results that name no configured
// destination (invalid_event, unknown_pipeline, unknown_destination).
type withoutDestinationJSON struct {
	Count int `json:"count"`

	// Recent are the newest of them, newest first.
	Recent []historyEntryJSON `json:"recent"`
}

// destResults is what the events stream says of one destination.
type destResults struct {
	counts                     resultCountsJSON
	lastPublished, lastFailure *historyEntryJSON
}

func (r *destResults) add(s events.Stored) {
	e := toHistoryEntry(s.Result)
	switch s.Type {
	case events.TypePublished:
		r.counts.Published++
		r.counts.Failing, r.counts.SupersededSincePublished = 0, 0
		r.lastPublished = &e
	case events.TypeFailed, events.TypeCollision:
		r.counts.Failed++
		r.counts.Failing++
		r.lastFailure = &e
	case events.TypeSuperseded:
		r.counts.Superseded++
		r.counts.SupersededSincePublished++
	}
}

// withoutDestination reports whether r is a failure that belongs to no
// configured destination.
func withoutDestination(r events.Result) bool {
	return r.Type == events.TypeFailed && (r.DestinationID == "" || r.Reason == events.ReasonUnknownDestination)
}

// readResults reads the events stream once for the results of dests and,
// with unrouted, the failures without a destination.
func readResults(ctx context.Context, streams *events.Streams, dests []config.Destination, unrouted bool) (map[string]*destResults, *withoutDestinationJSON, error) {
	out := make(map[string]*destResults, len(dests))
	for _, d := range dests {
		out[d.ID] = &destResults{}
	}
	s := streams.Subjects
	subjects := []string{s.ResultFilter("", "", "")}
	if len(dests) == 1 && !unrouted {
		subjects = []string{s.ResultFilter("", dests[0].ID, "")}
	}
	var none *withoutDestinationJSON
	if unrouted {
		none = &withoutDestinationJSON{Recent: []historyEntryJSON{}}
	}
	err := events.ReadResults(ctx, streams.Events, subjects, func(r events.Stored) error {
		if dr := out[r.DestinationID]; dr != nil {
			dr.add(r)
			return nil
		}
		if none != nil && withoutDestination(r.Result) {
			none.Count++
			none.Recent = append(none.Recent, toHistoryEntry(r.Result))
			if len(none.Recent) > recentWithoutDestination {
				none.Recent = none.Recent[1:]
			}
		}
		return nil
	})
	if none != nil {
		for i, j := 0, len(none.Recent)-1; i < j; i, j = i+1, j-1 {
			none.Recent[i], none.Recent[j] = none.Recent[j], none.Recent[i]
		}
	}
	return out, none, err
}

// summarize fills ds.Summary from what was read, at now.
func (ds *destStatusJSON) summarize(r *destResults, now time.Time) {
	s := summaryJSON{Locked: liveHolder(ds.Lease)}
	if r != nil {
		counts := r.counts
		s.Results = &counts
		ds.LastPublished, ds.LastFailure = r.lastPublished, r.lastFailure
		s.LastFailureStale = r.lastFailure != nil && counts.Failing == 0
	}
	s.Pinned = pinnedWhy(ds.Owners, s.Results, now)
	ds.Summary = s
}

// liveHolder reports whether a holder that still renews has the root.
func liveHolder(l leaseStatusJSON) bool {
	return l.KV != nil && !l.KV.Stale || l.Lock != nil && !l.Lock.Stale && !l.Lock.Unreadable
}

// pinnedWhy says why the destination looks pinned, or "".
func pinnedWhy(owners []ownerStatusJSON, counts *resultCountsJSON, now time.Time) string {
	for _, o := range owners {
		if len(o.Sources) > 0 && o.Sources[0].Created.After(now) {
			s := o.Sources[0]
			return fmt.Sprintf("live version %s of %s was created %s, in the future: older versions are superseded until then",
				s.ID, o.PipelineID, s.Created.Format(time.RFC3339))
		}
	}
	if counts != nil && counts.SupersededSincePublished >= pinnedAfterSuperseded {
		return fmt.Sprintf("%d versions superseded since the last publication", counts.SupersededSincePublished)
	}
	return ""
}

// healthPart is one part of a destination's health line: its text, a
// class for the status page (ok, err, warn, muted or "") and, for a time,
// the absolute time.
type healthPart struct {
	Text, Class, Title string
}

// healthParts is a destination's health line at now; natsKnown says
// whether the events stream was read.
func healthParts(d destStatusJSON, natsKnown bool, now time.Time) []healthPart {
	var parts []healthPart
	s := d.Summary
	if c := s.Results; c != nil && natsKnown {
		pub := healthPart{Text: fmt.Sprintf("%d published", c.Published), Class: "ok"}
		if d.LastPublished != nil {
			pub.Text += ", last " + ago(d.LastPublished.Time, now)
			pub.Title = d.LastPublished.Time.UTC().Format(time.RFC3339)
		} else {
			pub.Class = "muted"
		}
		parts = append(parts, pub)
		fail := healthPart{Text: fmt.Sprintf("%d failing", c.Failing), Class: "muted"}
		if c.Failing > 0 {
			fail.Class = "err"
		}
		if c.Failing != c.Failed {
			fail.Text += fmt.Sprintf(" (%d failed in all)", c.Failed)
		}
		parts = append(parts, fail)
		sup := healthPart{Text: fmt.Sprintf("%d superseded", c.Superseded), Class: "muted"}
		if c.Superseded > 0 {
			sup.Class = ""
		}
		parts = append(parts, sup)
	} else {
		parts = append(parts, healthPart{Text: "results unknown without NATS", Class: "muted"})
	}
	if f := d.NotifyFailures; f != nil && natsKnown {
		parts = append(parts, healthPart{Text: fmt.Sprintf("%d notify failed", f.Count), Class: "warn", Title: "notify failures: " + notifyFailuresText(f)})
	}
	if s.Pinned != "" {
		parts = append(parts, healthPart{Text: "pinned", Class: "warn", Title: s.Pinned})
	}
	if s.Locked {
		parts = append(parts, healthPart{Text: "locked", Class: "warn", Title: "a live holder has the root's lease"})
	}
	return parts
}

// healthText is the health line in plain text.
func healthText(d destStatusJSON, natsKnown bool, now time.Time) string {
	parts := healthParts(d, natsKnown, now)
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		t := p.Text
		if p.Text == "pinned" {
			t += " (" + d.Summary.Pinned + ")"
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, " · ")
}

// ago says how long before now t was, in its largest unit ("3m ago");
// "in 3m" for a t after now.
func ago(t, now time.Time) string {
	d := now.Sub(t)
	suffix, prefix := " ago", ""
	if d < 0 {
		d, suffix, prefix = -d, "", "in "
	}
	var s string
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return prefix + s + suffix
}
