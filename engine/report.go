package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

const reportDir = catalog.ReservedDir + "/reports/"

// reportMaxAge bounds how long an unclaimed report is kept: longer than the
// bundle stream keeps events for redelivery and replay.
const reportMaxAge = 30 * 24 * time.Hour

type pendingReport struct {
	BundleEventID string   `json:"bundle_event_id"`
	PipelineID    string   `json:"pipeline_id"`
	DestinationID string   `json:"destination_id"`
	Written       []string `json:"written"`
	Deleted       []string `json:"deleted,omitempty"`

	// Result is the result of an attempt that finished but could not
	// deliver it (KeepResult): the next attempt delivers it instead of
	// running again.
	Result json.RawMessage `json:"result,omitempty"`
}

func reportPath(eventID string, owner catalog.Owner) string {
	sum := sha256.Sum256([]byte(eventID + "\x00" + owner.PipelineID + "\x00" + owner.DestinationID))
	return reportDir + hex.EncodeToString(sum[:16]) + ".json"
}

// readReport returns the pending report of a publication (zero if none).
func readReport(ctx context.Context, root storage.Backend, eventID string, owner catalog.Owner) (pendingReport, error) {
	if eventID == "" {
		return pendingReport{}, nil
	}
	data, _, err := root.ReadVersion(ctx, reportPath(eventID, owner))
	if err != nil || data == nil {
		return pendingReport{}, err
	}
	var r pendingReport
	if err := json.Unmarshal(data, &r); err != nil || r.BundleEventID != eventID || r.PipelineID != owner.PipelineID || r.DestinationID != owner.DestinationID {
		return pendingReport{}, nil // not ours or damaged: only a notification is at stake
	}
	return r, nil
}

// keepReport merges written and deleted paths into the publication's
// pending report.
func (e *Engine) keepReport(ctx context.Context, root storage.Backend, eventID string, owner catalog.Owner, written, deleted []string) error {
	if eventID == "" || len(written)+len(deleted) == 0 {
		return nil
	}
	r, err := readReport(ctx, root, eventID, owner)
	if err != nil {
		return err
	}
	r.BundleEventID, r.PipelineID, r.DestinationID = eventID, owner.PipelineID, owner.DestinationID
	r.Written = union(r.Written, written)
	r.Deleted = union(r.Deleted, deleted)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if _, err := root.Put(ctx, reportPath(eventID, owner), bytes.NewReader(data), int64(len(data)), storage.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("keep pending report in %s: %w", root, err)
	}
	e.expireReports(ctx, root)
	return nil
}

// expireReports removes pending reports nobody claimed for reportMaxAge.
func (e *Engine) expireReports(ctx context.Context, root storage.Backend) {
	cutoff := e.now().Add(-reportMaxAge)
	var old []string
	err := root.List(ctx, reportDir, func(o storage.ObjectInfo) error {
		if !o.ModTime.IsZero() && o.ModTime.Before(cutoff) {
			old = append(old, o.Path)
		}
		return nil
	})
	if err == nil && len(old) > 0 {
		err = root.Delete(ctx, old...)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		e.Log.Debug().Err(err).Str("root", root.String()).Msg("could not expire old pending reports")
	}
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// KeepResult keeps result, the encoded result of a publication that
// finished but whose result could not be delivered (NATS was away), in
// the root, for the next attempt of the same publication: that attempt
// returns it (Result.Kept) instead of running again, which would find its
// own work done or, once a newer version landed, superseded. Nothing else
// writes the publication's report once it finished, so no lease is
// needed.
func (e *Engine) KeepResult(ctx context.Context, root storage.Backend, eventID string, owner catalog.Owner, result []byte) error {
	if eventID == "" {
		return errors.New("engine: a result is kept only for a publication of a bundle event")
	}
	data, err := json.MarshalIndent(pendingReport{BundleEventID: eventID, PipelineID: owner.PipelineID, DestinationID: owner.DestinationID,
		Written: []string{}, Result: result}, "", "  ")
	if err != nil {
		return err
	}
	if _, err := root.Put(ctx, reportPath(eventID, owner), bytes.NewReader(data), int64(len(data)), storage.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("keep the result of %s in %s: %w", eventID, root, err)
	}
	return nil
}

// ForgetResult removes the result KeepResult kept, once delivered.
func (e *Engine) ForgetResult(ctx context.Context, root storage.Backend, eventID string, owner catalog.Owner) error {
	if err := root.Delete(ctx, reportPath(eventID, owner)); err != nil {
		return fmt.Errorf("remove the kept result of %s in %s: %w", eventID, root, err)
	}
	return nil
}
