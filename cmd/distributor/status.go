package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

func (a *app) statusCommand() *cobra.Command {
	var dest string
	var asJSON, noLeftovers bool
	cmd := &cobra.Command{
		Use:   "status [--destination D] [--json]",
		Short: "Show what is live in each destination: sources per owner, recovery, leftovers, lease, last results",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			dests := cfg.Destinations
			if dest != "" {
				d, err := destination(cfg, dest)
				if err != nil {
					return err
				}
				dests = []config.Destination{d}
			}
			out, err := a.status(cmd.Context(), cfg, dests, !noLeftovers, dest == "")
			if asJSON {
				if jerr := a.printJSON(out); jerr != nil {
					return jerr
				}
			} else {
				a.printStatus(out)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dest, "destination", "", "only this destination (default: every destination of the configuration)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object (docs/cli.md)")
	cmd.Flags().BoolVar(&noLeftovers, "no-leftovers", false, "do not look for leftovers of interrupted writes (on a local root that walks every folder)")
	return cmd
}

// statusJSON is status --json.
type statusJSON struct {
	Destinations []destStatusJSON `json:"destinations"`

	// NATS says whether the lease bucket and the events stream were read.
	NATS natsStatusJSON `json:"nats"`

	// FailuresWithoutDestination are the failed results that name no
	// configured destination; absent for one destination or without NATS.
	FailuresWithoutDestination *withoutDestinationJSON `json:"failures_without_destination,omitempty"`
}

type natsStatusJSON struct {
	Known bool `json:"known"`

	// Error is why NATS could not be read although it is configured.
	Error string `json:"error,omitempty"`
}

type destStatusJSON struct {
	DestinationID string `json:"destination_id"`
	Backend       string `json:"backend"`
	Root          string `json:"root"`
	RootAsWritten string `json:"root_as_written,omitempty"`
	Workflow      string `json:"workflow"`

	// Summary is the destination's health line.
	Summary summaryJSON `json:"summary"`

	// Pipelines are the configured pipelines that publish here.
	Pipelines []string          `json:"pipelines"`
	Catalog   catalogStatusJSON `json:"catalog"`

	// Owners are this destination's owners (one per pipeline) in the
	// root; OtherOwners those of other destinations sharing the root.
	Owners          []ownerStatusJSON       `json:"owners"`
	OtherOwners     []ownerStatusJSON       `json:"other_owners"`
	PendingRecovery bool                    `json:"pending_recovery"`
	Leftovers       *service.LeftoverReport `json:"leftovers,omitempty"`

	// Retired are the paths kept for readers of a previous version
	// (retain_previous); absent when none.
	Retired *retiredJSON    `json:"retired,omitempty"`
	Lease   leaseStatusJSON `json:"lease"`

	// UndeliveredResults are results of this destination an attempt kept
	// in the root because it could not deliver them; absent when none.
	UndeliveredResults []undeliveredJSON `json:"undelivered_results,omitempty"`

	// LastPublished and LastFailure (failed or collision) come from the
	// events stream when NATS is known.
	LastPublished *historyEntryJSON `json:"last_published,omitempty"`
	LastFailure   *historyEntryJSON `json:"last_failure,omitempty"`

	// NotifyFailures are the destination's notify_failed events in the
	// events stream; absent when there are none or NATS is not known.
	NotifyFailures *notifyFailuresJSON `json:"notify_failures,omitempty"`
	Error          string              `json:"error,omitempty"`
}

// undeliveredJSON is a result kept in the root, not yet delivered.
type undeliveredJSON struct {
	BundleEventID string    `json:"bundle_event_id"`
	PipelineID    string    `json:"pipeline_id"`
	Type          string    `json:"type"`
	KeptSince     time.Time `json:"kept_since"`
}

type catalogStatusJSON struct {
	Present   bool       `json:"present"`
	Legacy    bool       `json:"legacy,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	Outputs   int        `json:"outputs"`
	Bytes     int64      `json:"bytes"`
}

type ownerStatusJSON struct {
	PipelineID    string             `json:"pipeline_id"`
	DestinationID string             `json:"destination_id"`
	Outputs       int                `json:"outputs"`
	Bytes         int64              `json:"bytes"`
	Sources       []sourceStatusJSON `json:"sources"`
}

type sourceStatusJSON struct {
	ID        string    `json:"id"`
	Digest    string    `json:"digest"`
	Created   time.Time `json:"created"`
	Outputs   int       `json:"outputs"`
	Bytes     int64     `json:"bytes"`
	UpdatedAt time.Time `json:"updated_at"`
}

// leaseStatusJSON names the holders of the root's lease: the KV key (when
// NATS is known) and the lock object in the root; null when free.
type leaseStatusJSON struct {
	KV   *lease.Holding `json:"kv"`
	Lock *lease.Holding `json:"lock"`

	// KVError is why the KV lease could not be read (kv is then null).
	KVError string `json:"kv_error,omitempty"`
}

// status reads each root once (destinations sharing a root share the
// read), the lease bucket and the events stream when NATS is known. It
// writes nothing anywhere. The error is the first destination's that
// could not be read; the others are still reported.
//
// With unrouted, the failures without a destination are read too.
func (a *app) status(ctx context.Context, cfg *config.Config, dests []config.Destination, leftovers, unrouted bool) (statusJSON, error) {
	src := statusSources{stores: stores.New(cfg), leftovers: leftovers, unrouted: unrouted}
	nc, streams, err := a.readStreams(ctx, cfg)
	switch {
	case errors.Is(err, errNoNATS):
	case err != nil:
		src.nats.Error = oneLine(err.Error())
	default:
		defer nc.Close()
		src.nats.Known, src.streams = true, streams
	}
	return a.readStatus(ctx, cfg, dests, src)
}

// statusSources is what a status report reads beside the roots.
type statusSources struct {
	stores *stores.Opener

	// leftovers walks each root for leftovers of interrupted writes;
	// unrouted reads the failures without a destination.
	leftovers, unrouted bool

	// catalogs keeps the roots' catalog summaries between reports (nil:
	// every report reads every catalog).
	catalogs *service.CatalogSummaries

	// streams are the lease bucket and the events stream to read (nil:
	// none); nats is what the report says of NATS.
	streams *events.Streams
	nats    natsStatusJSON
}

// readStatus is the status report of dests: the status command and serve's
// status page both make it.
func (a *app) readStatus(ctx context.Context, cfg *config.Config, dests []config.Destination, src statusSources) (statusJSON, error) {
	out := statusJSON{Destinations: make([]destStatusJSON, 0, len(dests)), NATS: src.nats}
	svc := &service.Service{Engine: service.NewEngine(version, nil, a.log), Config: cfg, Stores: src.stores}
	roots := map[string]rootRead{}
	var first error
	for _, d := range dests {
		ds := destStatusJSON{DestinationID: d.ID, Backend: d.Backend, Root: d.RootKey(), Workflow: string(d.Workflow),
			Pipelines: pipelinesOf(cfg, d.ID), Owners: []ownerStatusJSON{}, OtherOwners: []ownerStatusJSON{}}
		rr, ok := roots[d.RootKey()]
		if !ok {
			rr = a.readRoot(ctx, src, svc, d)
			roots[d.RootKey()] = rr
		}
		if rr.err != nil {
			ds.Error = oneLine(rr.err.Error())
			if first == nil {
				first = fmt.Errorf("%s: %w", d.ID, rr.err)
			}
		}
		ds.fill(rr, d.ID)
		ds.RootAsWritten = a.rootAsWritten(ds.Root)
		out.Destinations = append(out.Destinations, ds)
	}

	// The roots first: under a deadline (the status page) the events
	// stream gets what is left.
	var results map[string]*destResults
	var notifyFailures map[string]*notifyFailuresJSON
	if src.streams != nil {
		var err, nerr error
		results, out.FailuresWithoutDestination, err = readResults(ctx, src.streams, dests, src.unrouted)
		notifyFailures, nerr = readNotifyFailures(ctx, src.streams, "")
		if err = errors.Join(err, nerr); err != nil {
			out.NATS.Error = oneLine(err.Error())
		}
	}
	now := a.clock()
	for i := range out.Destinations {
		ds := &out.Destinations[i]
		r := results[ds.DestinationID]
		if r == nil && src.nats.Known {
			r = &destResults{} // no stream yet: no results
		}
		ds.summarize(r, now)
		ds.NotifyFailures = notifyFailures[ds.DestinationID]
	}
	return out, first
}

// rootRead is what status read of one root.
type rootRead struct {
	st   service.RootStatus
	kv   *lease.Holding
	kept []service.KeptResult

	// err: the root could not be read; kvErr: its KV lease could not.
	err, kvErr error
}

func (a *app) readRoot(ctx context.Context, src statusSources, svc *service.Service, d config.Destination) rootRead {
	var rr rootRead
	rr.st, rr.kept, rr.err = svc.Status(ctx, d, service.StatusOptions{Leftovers: src.leftovers, Catalogs: src.catalogs})
	if rr.st.Root == "" {
		return rr // the root could not be opened
	}
	if streams := src.streams; streams != nil && streams.Leases != nil {
		kctx, cancel := context.WithTimeout(ctx, natsReadTimeout)
		rr.kv, rr.kvErr = lease.ReadKV(kctx, streams.Leases, d.RootKey(), time.Now())
		cancel()
	}
	return rr
}

// natsReadTimeout bounds status's read of one lease key: NATS that does
// not answer (or permissions that forbid the read) is reported, and the
// roots are still shown.
const natsReadTimeout = 5 * time.Second

// fill copies what was read of the root into the destination's status.
func (ds *destStatusJSON) fill(rr rootRead, dest string) {
	st := rr.st
	if st.Root != "" {
		ds.Root = st.Root
	}
	ds.Catalog = catalogStatusJSON{Present: st.Catalog, Legacy: st.Legacy, Outputs: st.Outputs, Bytes: st.Bytes}
	if !st.UpdatedAt.IsZero() {
		t := st.UpdatedAt.UTC()
		ds.Catalog.UpdatedAt = &t
	}
	for _, o := range st.Owners {
		j := ownerStatusJSON{PipelineID: o.Owner.PipelineID, DestinationID: o.Owner.DestinationID, Outputs: o.Outputs, Bytes: o.Bytes,
			Sources: make([]sourceStatusJSON, 0, len(o.Sources))}
		for _, s := range o.Sources {
			j.Sources = append(j.Sources, sourceStatusJSON{ID: s.Source.ID, Digest: s.Source.Digest, Created: s.Source.Created.UTC(),
				Outputs: s.Outputs, Bytes: s.Bytes, UpdatedAt: s.UpdatedAt.UTC()})
		}
		if o.Owner.DestinationID == dest {
			ds.Owners = append(ds.Owners, j)
		} else {
			ds.OtherOwners = append(ds.OtherOwners, j)
		}
	}
	ds.PendingRecovery = st.PendingRecovery
	if st.Retired.Paths > 0 {
		ds.Retired = &retiredJSON{Paths: st.Retired.Paths, RemovedAfter: st.Retired.Until.UTC()}
	}
	if st.Leftovers != nil {
		lo := *st.Leftovers
		if lo.Paths == nil {
			lo.Paths = []string{}
		}
		ds.Leftovers = &lo
	}
	ds.Lease = leaseStatusJSON{KV: rr.kv, Lock: st.Lock}
	for _, k := range rr.kept {
		var r struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(k.Result, &r)
		if k.Owner.DestinationID == dest {
			ds.UndeliveredResults = append(ds.UndeliveredResults, undeliveredJSON{BundleEventID: k.EventID, PipelineID: k.Owner.PipelineID, Type: r.Type, KeptSince: k.Since.UTC()})
		}
	}
	if rr.kvErr != nil {
		ds.Lease.KVError = oneLine(rr.kvErr.Error())
	}
}

// pipelinesOf lists the configured pipelines that publish to dest.
func pipelinesOf(cfg *config.Config, dest string) []string {
	out := []string{}
	for _, p := range cfg.Pipelines {
		for _, d := range p.Destinations {
			if d == dest {
				out = append(out, p.ID)
				break
			}
		}
	}
	return out
}

func (a *app) printStatus(s statusJSON) {
	now := a.clock()
	for i, d := range s.Destinations {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		a.printDestStatus(d, s.NATS, now)
	}
	if f := s.FailuresWithoutDestination; f != nil {
		a.printWithoutDestination(*f, now)
	}
	if s.NATS.Error != "" {
		fmt.Fprintf(a.stdout, "\nNATS: %s\n", s.NATS.Error)
	}
}

func (a *app) printDestStatus(d destStatusJSON, n natsStatusJSON, now time.Time) {
	w := a.stdout
	fmt.Fprintf(w, "%s (%s, %s, %s)\n", d.DestinationID, a.showRoot(d.Root), d.Backend, d.Workflow)
	fmt.Fprintf(w, "  health: %s\n", healthText(d, n.Known, now))
	if d.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", d.Error)
	}
	if line := catalogText(d); line != "" {
		fmt.Fprintf(w, "  catalog: %s\n", line)
	}
	if len(d.Owners) > 0 {
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "  PIPELINE\tSOURCE\tOUTPUTS\tBYTES\tUPDATED")
		for _, o := range d.Owners {
			for i, s := range o.Sources {
				p := o.PipelineID
				if i > 0 {
					p = ""
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", p, sourceLabel(&events.SourceRef{ID: s.ID, Digest: s.Digest, Created: s.Created}),
					s.Outputs, s.Bytes, catalog.FormatTime(s.UpdatedAt))
			}
		}
		_ = tw.Flush()
	} else if d.Catalog.Present && !d.Catalog.Legacy {
		fmt.Fprintf(w, "  no output of %s in the root\n", d.DestinationID)
	}
	if others := otherOwnersText(d.OtherOwners); others != "" {
		fmt.Fprintf(w, "  also in this root: %s\n", others)
	}
	fmt.Fprintf(w, "  pending recovery: %s\n", recoveryText(d.PendingRecovery))
	if lo := d.Leftovers; lo != nil {
		fmt.Fprintf(w, "  leftovers: %s\n", leftoversText(*lo))
	}
	if r := d.Retired; r != nil {
		fmt.Fprintf(w, "  %s\n", retiredText(*r))
	}
	printLease(w, d.Lease, n.Known)
	for _, u := range d.UndeliveredResults {
		fmt.Fprintf(w, "  undelivered result: %s of event %s (%s), kept in the root since %s; serve delivers it with the event's next attempt, or by itself once it is %s old\n",
			u.Type, u.BundleEventID, u.PipelineID, catalog.FormatTime(u.KeptSince), consumer.DefaultKeptResultAge)
	}
	if !n.Known {
		fmt.Fprintf(w, "  last published, last failure: unknown without NATS (set nats.url or start `distributor serve`)\n")
		return
	}
	printLast(w, "last published", d.LastPublished)
	failure := lastText(d.LastFailure)
	if d.Summary.LastFailureStale {
		failure += " (older than the last publication)"
	}
	fmt.Fprintf(w, "  last failure: %s\n", failure)
	if d.NotifyFailures != nil {
		fmt.Fprintf(w, "  notify failures: %s\n", notifyFailuresText(d.NotifyFailures))
	}
}

// leftoversText says what interrupted writes left in a root: those older
// than the leftover age, and how many younger ones may still be in use.
func leftoversText(lo service.LeftoverReport) string {
	s := "none"
	if lo.Count > 0 {
		s = fmt.Sprintf("%d of interrupted writes, %d bytes, oldest from %s: reconcile-state removes them", lo.Count, lo.Bytes, catalog.FormatTime(*lo.Oldest))
	}
	if lo.Recent > 0 {
		if lo.Count == 0 {
			s = "none older than " + shortDuration(service.DefaultLeftoverAge)
		}
		s += fmt.Sprintf("; %d younger than %s, may be in use", lo.Recent, shortDuration(service.DefaultLeftoverAge))
	}
	return s
}

// shortDuration is d without its zero minutes and seconds ("1h").
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

func (a *app) printWithoutDestination(f withoutDestinationJSON, now time.Time) {
	w := a.stdout
	fmt.Fprintf(w, "\nfailures without a destination: %d in the events stream\n", f.Count)
	for _, e := range f.Recent {
		fmt.Fprintf(w, "  %s (%s)\n", lastText(&e), ago(e.Time, now))
	}
}

// otherOwnersText lists the owners of other destinations in the root, or
// "" when there are none.
func otherOwnersText(owners []ownerStatusJSON) string {
	others := make([]string, 0, len(owners))
	for _, o := range owners {
		others = append(others, fmt.Sprintf("%s/%s (%d output(s))", o.PipelineID, o.DestinationID, o.Outputs))
	}
	return strings.Join(others, ", ")
}

func recoveryText(pending bool) string {
	if pending {
		return "an interrupted publication is not finished; the next publication or maintenance command on the root finishes it"
	}
	return "none"
}

// catalogText says what the destination's catalog holds, or "" when the
// root could not be read.
func catalogText(d destStatusJSON) string {
	c := d.Catalog
	switch {
	case !c.Present && d.Error == "":
		return "none yet (nothing published)"
	case c.Legacy:
		return "superseded legacy state (schema_version < 4); the next publication replaces it"
	case c.Present:
		return fmt.Sprintf("%d output(s), %d bytes, updated %s", c.Outputs, c.Bytes, catalog.FormatTime(*c.UpdatedAt))
	}
	return ""
}

func printLease(w io.Writer, l leaseStatusJSON, natsKnown bool) {
	if kv := kvLeaseText(l, natsKnown); kv != "" {
		fmt.Fprintf(w, "  lease (NATS): %s\n", kv)
	}
	fmt.Fprintf(w, "  lock object: %s\n", holderText(l.Lock))
}

// kvLeaseText says who holds the KV lease, or "" when NATS is not known.
func kvLeaseText(l leaseStatusJSON, natsKnown bool) string {
	switch {
	case l.KVError != "":
		return "unknown: " + l.KVError
	case l.KV != nil:
		return holderText(l.KV)
	case natsKnown:
		return "free"
	}
	return ""
}

// holderText says who holds a lease (nil: free) and until when.
func holderText(h *lease.Holding) string {
	switch {
	case h == nil:
		return "free"
	case h.Unreadable:
		return "unreadable (torn by a crash): the next run takes it over"
	case h.Stale:
		return fmt.Sprintf("held by %s until %s: stale, the next run takes it over", h.Holder, catalog.FormatTime(h.Expires))
	}
	s := "held by " + h.Holder
	if h.PID > 0 {
		s += fmt.Sprintf(" (pid %d on %s)", h.PID, h.Host)
	}
	s += " until " + catalog.FormatTime(h.Expires)
	if h.ID != "" {
		s += ", lease id " + h.ID // what `distributor unlock --id` takes
	}
	return s
}

func printLast(w io.Writer, what string, e *historyEntryJSON) {
	fmt.Fprintf(w, "  %s: %s\n", what, lastText(e))
}

// lastText is one result of the events stream on one line: when, who,
// which version from where, what it did and the event id.
func lastText(e *historyEntryJSON) string {
	if e == nil {
		return "none in the events stream"
	}
	detail := e.summary()
	if e.Type == events.TypeFailed && e.Message != "" {
		detail += " (" + e.Message + ")"
	}
	return escapeControl(fmt.Sprintf("%s %s %s from %s: %s (event %s)", catalog.FormatTime(e.Time), e.PipelineID, sourceLabel(e.Source), orDash(e.Bundle), detail, e.EventID))
}

// retiredJSON is what a root keeps for readers of a previous version.
type retiredJSON struct {
	Paths        int       `json:"paths"`
	RemovedAfter time.Time `json:"removed_after"`
}

// retiredText is the status line of the retired paths.
func retiredText(r retiredJSON) string {
	return fmt.Sprintf("retired: %d, removed after %s", r.Paths, catalog.FormatTime(r.RemovedAfter))
}
