// Package events defines distributor's JetStream messages: the bundle-ready
// event producers announce and the result events distributor publishes, their
// JSON codecs, subjects, stream and key-value setup, and publishing.
package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/internal/jsonfast"
)

// SchemaVersion is the version of every event this package writes and reads.
const SchemaVersion = 1

// Event types.
const (
	TypeBundleReady = "bundle.ready"
	TypePublished   = "published"
	TypeCollision   = "collision"
	TypeSuperseded  = "superseded"
	TypeFailed      = "failed"
	TypePruned      = "pruned"
	TypeReconciled  = "reconciled"
)

// Reason codes of failed events.
const (
	ReasonInvalidEvent       = "invalid_event"
	ReasonUnknownPipeline    = "unknown_pipeline"
	ReasonUnknownDestination = "unknown_destination"
	ReasonBundleMissing      = "bundle_missing"
	ReasonDigestMismatch     = "digest_mismatch"
	ReasonContentMismatch    = "content_mismatch"
	ReasonInvalidCatalog     = "invalid_catalog"
	ReasonNewerCatalog       = "newer_catalog"
	ReasonRefused            = "refused"
	ReasonMaxDeliveries      = "max_deliveries"
	ReasonStorage            = "storage"
	ReasonRootMissing        = "root_missing"
	ReasonStorageDenied      = "storage_denied"
	ReasonBundleNotAllowed   = "bundle_not_allowed"
	ReasonInvalidBundle      = "invalid_bundle"
	ReasonInternal           = "internal"
)

// Reasons are every reason code of failed events, in the order above.
func Reasons() []string {
	return []string{ReasonInvalidEvent, ReasonUnknownPipeline, ReasonUnknownDestination, ReasonBundleMissing,
		ReasonDigestMismatch, ReasonContentMismatch, ReasonInvalidCatalog, ReasonNewerCatalog, ReasonRefused,
		ReasonMaxDeliveries, ReasonStorage, ReasonRootMissing, ReasonStorageDenied, ReasonBundleNotAllowed,
		ReasonInvalidBundle, ReasonInternal}
}

// Output actions.
const (
	ActionWritten = "written"
	ActionUpdated = "updated"
	ActionDeleted = "deleted"
)

// ErrInvalidEvent marks an event that cannot be decoded or fails validation.
var ErrInvalidEvent = errors.New("invalid event")

// Limits of a bundle-ready event. They keep every result event about it,
// which embeds it and quotes its fields, far below the result size limit
// (DefaultMaxResultBytes) and NATS' max_payload (1 MiB by default).
const (
	MaxEventBytes   = 64 << 10 // encoded event
	MaxEventIDBytes = 512      // id; a replay adds ".replay.<n>" to its original's
	MaxIDBytes      = 256      // pipeline_id and each destination id
	MaxBundleBytes  = 4096     // bundle location
	MaxDestinations = 256
)

// BundleReady is the event a producer publishes when a bundle is complete.
// ProducedAt plays the role of the event time.
type BundleReady struct {
	SchemaVersion  int       `json:"schema_version"`
	Type           string    `json:"type"`
	ID             string    `json:"id"`
	PipelineID     string    `json:"pipeline_id"`
	Bundle         string    `json:"bundle"`
	ManifestDigest string    `json:"manifest_digest"`
	ProducedAt     time.Time `json:"produced_at,omitzero"`

	// Destinations optionally limits the publication to a subset of the
	// pipeline's destinations.
	Destinations []string `json:"destinations,omitempty"`

	// ReplayOf names the event this one replays.
	ReplayOf string `json:"replay_of,omitempty"`

	// TakeOwnership adopts colliding unmanaged paths (set by an operator's
	// `replay --take-ownership`; the result event names the adopted paths).
	TakeOwnership bool `json:"take_ownership,omitempty"`

	// AllowOlder publishes even when the destination already holds a newer
	// version of the same source (an operator's deliberate roll back).
	AllowOlder bool `json:"allow_older,omitempty"`

	// RollbackOf marks an operator's roll back (`distributor rollback`):
	// the published result event whose version it restores, or that
	// version's manifest digest when no such event is known. Honoured only
	// with AllowOlder; the published result carries it on.
	RollbackOf string `json:"rollback_of,omitempty"`

	// DeleteLater makes an additive roll back also delete the owner's
	// paths that only newer versions of the source wrote (`distributor
	// rollback --delete-later`). Honoured only with AllowOlder.
	DeleteLater bool `json:"delete_later,omitempty"`
}

// SourceRef is the source identity of a published bundle.
type SourceRef struct {
	ID      string    `json:"id"`
	Digest  string    `json:"digest"`
	Created time.Time `json:"created,omitzero"`
}

// OutputRef is one changed output of a publication. An output with a
// digest always has its size in JSON, 0 for an empty file.
type OutputRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	URL    string `json:"url,omitempty"`
	Action string `json:"action"`
}

// MarshalJSON writes size whenever the output has a digest, so that a
// consumer never mistakes an empty file for an unknown size. It writes
// what encoding/json writes of the struct of its fields (size a pointer,
// omitted when nil), without reflection: a result may list thousands.
func (o OutputRef) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, o.encodedLen())
	b = jsonfast.AppendString(append(b, `{"path":`...), o.Path, true)
	if o.SHA256 != "" {
		b = jsonfast.AppendString(append(b, `,"sha256":`...), o.SHA256, true)
	}
	if o.SHA256 != "" || o.Size != 0 {
		b = strconv.AppendInt(append(b, `,"size":`...), o.Size, 10)
	}
	if o.URL != "" {
		b = jsonfast.AppendString(append(b, `,"url":`...), o.URL, true)
	}
	b = jsonfast.AppendString(append(b, `,"action":`...), o.Action, true)
	return append(b, '}'), nil
}

// encodedLen is len(json.Marshal(o)) without encoding it: each string's
// length as encoding/json escapes it (HTML characters, U+2028 and U+2029
// as \uXXXX, invalid UTF-8 as \ufffd).
func (o OutputRef) encodedLen() int {
	n := len(`{"path":,"action":}`) + jsonfast.StringLen(o.Path, true) + jsonfast.StringLen(o.Action, true)
	if o.SHA256 != "" {
		n += len(`,"sha256":`) + jsonfast.StringLen(o.SHA256, true)
	}
	if o.SHA256 != "" || o.Size != 0 {
		var digits [20]byte
		n += len(`,"size":`) + len(strconv.AppendInt(digits[:0], o.Size, 10))
	}
	if o.URL != "" {
		n += len(`,"url":`) + jsonfast.StringLen(o.URL, true)
	}
	return n
}

// Result reports what distributor did: a publication (published,
// superseded, collision, failed) or a maintenance run (pruned, reconciled).
type Result struct {
	SchemaVersion int       `json:"schema_version"`
	Type          string    `json:"type"`
	ID            string    `json:"id"`
	Time          time.Time `json:"time"`

	BundleEventID string     `json:"bundle_event_id,omitempty"`
	PipelineID    string     `json:"pipeline_id,omitempty"`
	DestinationID string     `json:"destination_id,omitempty"`
	Source        *SourceRef `json:"source,omitempty"`

	// SupersededBy is the newer source identity that a superseded
	// publication lost to.
	SupersededBy *SourceRef `json:"superseded_by,omitempty"`

	// Bundle is the bundle's location (published and superseded results),
	// so that a version can be found again (history, rollback).
	Bundle string `json:"bundle,omitempty"`

	// RollbackOf marks a published result of an operator's roll back: the
	// bundle-ready event's RollbackOf.
	RollbackOf string `json:"rollback_of,omitempty"`

	Written int `json:"written"`

	// Updated counts records changed without a byte write (a new source
	// identity, owner or url for the same bytes).
	Updated   int `json:"updated,omitempty"`
	Unchanged int `json:"unchanged"`
	Deleted   int `json:"deleted"`

	// KeptNewer counts the planned paths an older additive publication
	// left as a newer version of its source wrote them (newest wins per
	// path).
	KeptNewer int `json:"kept_newer,omitempty"`

	// Outputs lists the changed outputs; OutputsTruncated says some were
	// left out to keep the event under the size limit (the counts are exact).
	Outputs          []OutputRef `json:"outputs,omitempty"`
	OutputsTruncated bool        `json:"outputs_truncated,omitempty"`

	// Collisions are the unmanaged paths that blocked the publication.
	Collisions []string `json:"collisions,omitempty"`

	// Adopted are colliding paths taken over with --take-ownership.
	Adopted []string `json:"adopted,omitempty"`

	// ListsTruncated says collisions, adopted or size_mismatches were cut
	// to keep the event under the size limit.
	ListsTruncated bool `json:"lists_truncated,omitempty"`

	// Failed events.
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Attempts int    `json:"attempts,omitempty"`

	// Original is the bundle-ready event behind a failed or collision
	// event, kept so that it can be replayed.
	Original *BundleReady `json:"original,omitempty"`

	// OriginalRef names the stored bundle-ready message. Original is left
	// out when the event would not fit the size limit otherwise; replay
	// then fetches it from there.
	OriginalRef *MsgRef `json:"original_ref,omitempty"`

	// Reconciled events.
	Removed        int      `json:"removed,omitempty"`
	SizeMismatches []string `json:"size_mismatches,omitempty"`
}

// MsgRef names a message in a stream.
type MsgRef struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
}

// Encode returns the event's JSON.
func (e BundleReady) Encode() ([]byte, error) { return json.Marshal(e) }

// Encode returns the event's JSON.
func (r Result) Encode() ([]byte, error) { return json.Marshal(r) }

// Validate checks a bundle-ready event as DecodeBundleReady does.
func (e BundleReady) Validate() error {
	if e.SchemaVersion != SchemaVersion {
		return invalid("bundle.ready", "schema_version %d is not supported (want %d)", e.SchemaVersion, SchemaVersion)
	}
	if e.Type != TypeBundleReady {
		return invalid("bundle.ready", "type is %q, want %q", e.Type, TypeBundleReady)
	}
	if e.ID == "" {
		return invalid("bundle.ready", "id is empty")
	}
	if len(e.ID) > MaxEventIDBytes {
		return invalid("bundle.ready", "id %q is %d bytes, over the limit of %d", head(e.ID), len(e.ID), MaxEventIDBytes)
	}
	if !printable(e.ID) {
		return invalid("bundle.ready", "id %q contains whitespace or control characters", e.ID)
	}
	if len(e.PipelineID) > MaxIDBytes {
		return invalid("bundle.ready "+e.ID, "pipeline_id %q is %d bytes, over the limit of %d", head(e.PipelineID), len(e.PipelineID), MaxIDBytes)
	}
	if err := ValidatePipelineID(e.PipelineID); err != nil {
		return invalid("bundle.ready "+e.ID, "%v", err)
	}
	if e.Bundle == "" {
		return invalid("bundle.ready "+e.ID, "bundle is empty")
	}
	if len(e.Bundle) > MaxBundleBytes {
		return invalid("bundle.ready "+e.ID, "bundle location %q is %d bytes, over the limit of %d", head(e.Bundle), len(e.Bundle), MaxBundleBytes)
	}
	if hasControl(e.Bundle) {
		return invalid("bundle.ready "+e.ID, "bundle location %q contains control characters, which are not allowed", e.Bundle)
	}
	if !catalog.ValidDigest(e.ManifestDigest) {
		return invalid("bundle.ready "+e.ID, "manifest_digest %q is not sha256:<64 lowercase hex>", e.ManifestDigest)
	}
	if e.RollbackOf != "" && (len(e.RollbackOf) > MaxEventIDBytes || !printable(e.RollbackOf)) {
		return invalid("bundle.ready "+e.ID, "rollback_of %q is not an event id or digest", head(e.RollbackOf))
	}
	if len(e.Destinations) > MaxDestinations {
		return invalid("bundle.ready "+e.ID, "%d destinations, over the limit of %d", len(e.Destinations), MaxDestinations)
	}
	seen := make(map[string]bool, len(e.Destinations))
	for _, d := range e.Destinations {
		if len(d) > MaxIDBytes {
			return invalid("bundle.ready "+e.ID, "destinations: destination id %q is %d bytes, over the limit of %d", head(d), len(d), MaxIDBytes)
		}
		if err := ValidateDestinationID(d); err != nil {
			return invalid("bundle.ready "+e.ID, "destinations: %v", err)
		}
		if seen[d] {
			return invalid("bundle.ready "+e.ID, "destinations: %q is listed twice", d)
		}
		seen[d] = true
	}
	return nil
}

// Validate checks a result event as DecodeResult does.
func (r Result) Validate() error {
	if r.SchemaVersion != SchemaVersion {
		return invalid("result", "schema_version %d is not supported (want %d)", r.SchemaVersion, SchemaVersion)
	}
	if !IsResultType(r.Type) {
		return invalid("result", "type %q is not one of published, superseded, collision, failed, pruned, reconciled", r.Type)
	}
	if r.ID == "" {
		return invalid(r.Type, "id is empty")
	}
	if !printable(r.ID) {
		return invalid(r.Type, "id %q contains whitespace or control characters", r.ID)
	}
	if r.Time.IsZero() {
		return invalid(r.Type+" "+r.ID, "time is missing")
	}
	if r.Type == TypeFailed && r.Reason == "" {
		return invalid(r.Type+" "+r.ID, "reason is empty")
	}
	if r.Original != nil {
		if err := r.Original.Validate(); err != nil {
			return fmt.Errorf("%s %s: original: %w", r.Type, r.ID, err)
		}
	}
	if ref := r.OriginalRef; ref != nil && (ref.Stream == "" || ref.Seq == 0) {
		return invalid(r.Type+" "+r.ID, "original_ref needs a stream and a sequence, got %q and %d", ref.Stream, ref.Seq)
	}
	return nil
}

// IsResultType reports whether t is a result event type.
func IsResultType(t string) bool {
	switch t {
	case TypePublished, TypeSuperseded, TypeCollision, TypeFailed, TypePruned, TypeReconciled:
		return true
	}
	return false
}

// DecodeBundleReady strictly decodes a bundle-ready event: unknown fields,
// a wrong type or schema version, a missing id, pipeline_id or bundle, a
// malformed manifest_digest, or a size over the limits (MaxEventBytes and
// the others) give an error wrapping ErrInvalidEvent.
func DecodeBundleReady(data []byte) (BundleReady, error) {
	if err := checkEventSize(len(data)); err != nil {
		return BundleReady{}, err
	}
	var e BundleReady
	if err := decodeStrict(data, &e); err != nil {
		return BundleReady{}, fmt.Errorf("%w: bundle.ready: %v", ErrInvalidEvent, err)
	}
	if err := e.Validate(); err != nil {
		return BundleReady{}, err
	}
	return e, nil
}

// DecodeResult strictly decodes a result event; errors wrap ErrInvalidEvent.
func DecodeResult(data []byte) (Result, error) {
	var r Result
	if err := decodeStrict(data, &r); err != nil {
		return Result{}, fmt.Errorf("%w: result: %v", ErrInvalidEvent, err)
	}
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	return r, nil
}

// head is the start of s, to name an over-long value in a message.
func head(s string) string {
	const n = 32
	if len(s) <= n {
		return s
	}
	k := n
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + "…"
}

func checkEventSize(n int) error {
	if n > MaxEventBytes {
		return invalid("bundle.ready", "the event is %d bytes, over the limit of %d", n, MaxEventBytes)
	}
	return nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func invalid(what, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidEvent, what, fmt.Sprintf(format, args...))
}

// hasControl reports whether s holds a control character or bytes that
// are not UTF-8 (a location may hold spaces, not terminal escapes).
func hasControl(s string) bool {
	for _, c := range s {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return true
		}
	}
	return false
}

// printable reports whether id has no whitespace, control or invalid UTF-8
// characters (it becomes a Nats-Msg-Id header).
func printable(id string) bool {
	for _, c := range id {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == unicode.ReplacementChar {
			return false
		}
	}
	return true
}
