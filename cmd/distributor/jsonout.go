package main

// The --json shapes of the commands that did not print JSON before; see
// docs/cli.md. Field names are snake_case like the events'.

import (
	"encoding/json"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
)

// printJSON writes v indented, as every --json does.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type removedJSON struct {
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	UpdatedAt time.Time `json:"updated_at"`
}

// verifyJSON is verify --json.
type verifyJSON struct {
	DestinationID string `json:"destination_id"`

	// PipelineID is --pipeline: null when every pipeline's outputs of the
	// destination were checked.
	PipelineID      *string                `json:"pipeline_id"`
	Root            string                 `json:"root"`
	RootAsWritten   string                 `json:"root_as_written,omitempty"`
	Checked         int                    `json:"checked"`
	Missing         []string               `json:"missing"`
	Damaged         []string               `json:"damaged"`
	InFlight        []string               `json:"in_flight"`
	Symlinks        []string               `json:"symlinks"`
	PendingRecovery bool                   `json:"pending_recovery"`
	Leftovers       service.LeftoverReport `json:"leftovers"`
}

func (a *app) toVerifyJSON(dest, pipeline string, rep service.VerifyReport) verifyJSON {
	out := verifyJSON{DestinationID: dest, Root: rep.Root, RootAsWritten: a.rootAsWritten(rep.Root),
		Checked: rep.Checked, Missing: nonNil(rep.Missing), Damaged: nonNil(rep.Damaged), InFlight: nonNil(rep.InFlight), Symlinks: nonNil(rep.Symlinks),
		PendingRecovery: rep.PendingRecovery, Leftovers: rep.Leftovers}
	if pipeline != "" {
		out.PipelineID = &pipeline
	}
	if out.Leftovers.Paths == nil {
		out.Leftovers.Paths = []string{}
	}
	return out
}

// pruneJSON is prune --json.
type pruneJSON struct {
	PipelineID    string        `json:"pipeline_id"`
	DestinationID string        `json:"destination_id"`
	Root          string        `json:"root"`
	RootAsWritten string        `json:"root_as_written,omitempty"`
	DryRun        bool          `json:"dry_run"`
	OlderThan     string        `json:"older_than"`
	Cutoff        time.Time     `json:"cutoff"`
	Removed       []removedJSON `json:"removed"`
	Error         string        `json:"error,omitempty"`
}

// reconcileJSON is one destination of reconcile-state --json.
type reconcileJSON struct {
	DestinationID  string                 `json:"destination_id"`
	Root           string                 `json:"root"`
	RootAsWritten  string                 `json:"root_as_written,omitempty"`
	DryRun         bool                   `json:"dry_run"`
	Removed        []removedJSON          `json:"removed"`
	SizeMismatches []string               `json:"size_mismatches"`
	Refreshed      []string               `json:"refreshed"`
	Leftovers      service.LeftoverReport `json:"leftovers"`
	Error          string                 `json:"error,omitempty"`
}

func (a *app) toReconcileJSON(d config.Destination, res service.MaintenanceResult, err error) reconcileJSON {
	root := res.Root
	if root == "" {
		root = d.RootKey()
	}
	out := reconcileJSON{DestinationID: d.ID, Root: root, RootAsWritten: a.rootAsWritten(root), DryRun: res.DryRun,
		Removed: removedOf(res), SizeMismatches: nonNil(res.Plan.SizeMismatches), Refreshed: []string{}, Leftovers: res.Leftovers}
	if out.Leftovers.Paths == nil {
		out.Leftovers.Paths = []string{}
	}
	for _, o := range res.Refreshed {
		out.Refreshed = append(out.Refreshed, o.Path)
	}
	if err != nil {
		out.Error = a.errorLine(err)
	}
	return out
}

func removedOf(res service.MaintenanceResult) []removedJSON {
	out := []removedJSON{}
	for _, o := range res.Plan.Removed {
		out = append(out, removedJSON{Path: o.Path, Size: o.Size, UpdatedAt: o.UpdatedAt})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// publishJSON is publish --json: the announcement and, with --wait, the
// result events (their documented event shape).
type publishJSON struct {
	EventID        string `json:"event_id"`
	PipelineID     string `json:"pipeline_id"`
	Bundle         string `json:"bundle"`
	ManifestDigest string `json:"manifest_digest"`
	Seq            uint64 `json:"seq"`
	Duplicate      bool   `json:"duplicate"`

	// Results is [] unless --wait waited for them.
	Results []events.Result `json:"results"`
	Error   string          `json:"error,omitempty"`
}

// replayJSON is replay --json.
type replayJSON struct {
	DryRun bool `json:"dry_run"`

	// Replays are the bundle events announced again (would be, with
	// dry_run; event_id is then empty).
	Replays []replayedJSON `json:"replays"`

	// Skipped are result events that cannot be replayed, with why.
	Skipped []skippedJSON `json:"skipped"`

	// AlreadyPublished counts matching bundle events a replay has since
	// published everywhere.
	AlreadyPublished int `json:"already_published"`

	// superseded is the superseded event --id names when --allow-older is
	// missing, for the hint.
	superseded string
}

type replayedJSON struct {
	OriginalID   string   `json:"original_id"`
	EventID      string   `json:"event_id,omitempty"`
	PipelineID   string   `json:"pipeline_id"`
	Bundle       string   `json:"bundle"`
	Destinations []string `json:"destinations"`

	// AlreadyAnnounced: a replay of the same failures (another `replay`
	// run at the same time) announced this event id first; this one was
	// dropped by the stream.
	AlreadyAnnounced bool `json:"already_announced,omitempty"`
}

type skippedJSON struct {
	EventID string `json:"event_id"`
	Reason  string `json:"reason"`
}
