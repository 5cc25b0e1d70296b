package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// IntentPath is where an in-flight publication records what it is doing:
// a compare-and-swap document (storage.Backend.WriteIfVersion), which a
// backend may rewrite and empty in place (storage.InPlace), so it carries
// a checksum (intentSumHead) and an empty one is none.
const IntentPath = catalog.ReservedDir + "/intent.json"

// readIntent returns the intent's bytes and version; nil bytes when there
// is none (missing, or emptied).
func readIntent(ctx context.Context, root storage.Backend) ([]byte, storage.Version, error) {
	data, v, err := root.ReadVersion(ctx, IntentPath, storage.InPlace)
	if err != nil || len(data) == 0 {
		return nil, "", err
	}
	return data, v, nil
}

// clearIntent removes the intent while it is still version want,
// durably after the next Sync (or the next intent written).
func clearIntent(ctx context.Context, root storage.Backend, want storage.Version) error {
	return root.DeleteIfVersion(ctx, IntentPath, want, storage.InPlace, storage.DeferSync)
}

// catalogDocument is next as a backend writes it (PrepareCatalog).
func catalogDocument(next *catalog.Catalog) storage.Document {
	return storage.Document{Path: catalog.FileName, Records: len(next.Outputs),
		Encode: func(w io.Writer) error { return catalog.MarshalTo(w, next) }}
}

// intentDoc is what an in-flight run records before it touches storage.
type intentDoc struct {
	// EventID and Owner name the publication (one bundle event may publish
	// several destinations into one root). Empty for maintenance runs.
	EventID string
	Owner   catalog.Owner

	// Writes are the records of the outputs about to be written; recovery
	// rolls forward those whose bytes landed.
	Writes []catalog.Output

	// Deletes are the paths about to be deleted.
	Deletes []string

	// Reported are paths that earlier attempts of the same publication
	// wrote: only reported by the attempt that finishes, never applied.
	Reported []string

	// Source is the version the publication writes (zero for maintenance
	// runs), and AllowOlder says it may replace newer versions of its
	// source (a roll back): recovery never lets an intent's writes or
	// deletes replace a newer version's records otherwise.
	Source     catalog.Source
	AllowOlder bool
}

type intentWire struct {
	Version       int             `json:"version"`
	BundleEventID string          `json:"bundle_event_id,omitempty"`
	PipelineID    string          `json:"pipeline_id,omitempty"`
	DestinationID string          `json:"destination_id,omitempty"`
	Writes        json.RawMessage `json:"writes,omitempty"`
	Deletes       []string        `json:"deletes"`
	Reported      []string        `json:"reported,omitempty"`
	Source        *catalog.Source `json:"source,omitempty"`
	AllowOlder    bool            `json:"allow_older,omitempty"`
}

// putIntent records doc as the root's intent, while the lease holds: from
// here on a crash is rolled forward by the next run. Publications and prune
// write it through here.
//
// Recovery leaves no intent before a run writes its own, so one found here
// is another holder's, which took the root while this one was paused past
// its lease, and may have named outputs under it: it is never replaced
// (ErrConflict; its retry would collide with its own bytes).
//
// It returns what it wrote, for dropIntent.
func putIntent(ctx context.Context, root storage.Backend, l lease.Lease, doc intentDoc) (writtenIntent, error) {
	data, err := encodeIntent(doc)
	if err != nil {
		return writtenIntent{}, err
	}
	if err := l.Err(); err != nil {
		return writtenIntent{}, err
	}
	v, err := root.WriteIfVersion(ctx, IntentPath, data, "", storage.InPlace)
	if errors.Is(err, storage.ErrConflict) {
		return writtenIntent{}, fmt.Errorf("write intent in %s: %w: it holds another run's intent (another holder took the root?)", root, err)
	}
	if err != nil {
		return writtenIntent{}, fmt.Errorf("write intent in %s: %w", root, err)
	}
	return writtenIntent{version: v}, nil
}

// writtenIntent is the intent a run wrote.
type writtenIntent struct {
	version storage.Version
}

// dropIntent removes the intent of a run that committed. One left behind
// is harmless: the next run finds its work done and removes it.
//
// The removal is not waited for (storage.DeferSync). One that a power
// loss undoes brings back an intent whose writes the catalog records
// already: rolling it forward changes nothing, unless a later commit
// changed those records first. So every commit follows either a flush of
// the root (Sync: publications, recovery, reconcile) or a durable intent of
// its own, which replaces this one (prune).
//
// wrote is the intent this run wrote (putIntent). A holder that lost its
// lease since its commit (paused past it) leaves the intent to the next
// holder, and the intent is emptied or removed only while it is still
// wrote: a newer holder may have taken the root and named outputs under
// its own intent, which a stale emptying would hide (its retry would then
// collide with its own bytes).
func (e *Engine) dropIntent(ctx context.Context, root storage.Backend, l lease.Lease, wrote writtenIntent) {
	if err := l.Err(); err != nil {
		e.Log.Warn().Err(err).Str("root", root.String()).Msg("left the intent to the next holder")
		return
	}
	err := clearIntent(ctx, root, wrote.version)
	if errors.Is(err, storage.ErrConflict) {
		e.Log.Warn().Str("root", root.String()).Msg("the intent is no longer this run's: left as it is")
		return
	}
	if err != nil {
		e.Log.Warn().Err(err).Str("root", root.String()).Msg("could not remove the intent; the next run removes it")
	}
}

// intentSumHead starts every intent: its first member is the sha256 of
// the bytes after it ("version" on), so that a copy torn by a crash in
// the middle of an in-place rewrite is recognised. Readers that know
// nothing of it ignore the member.
const intentSumHead = `{"sha256":"`

// errTornIntent: the intent's bytes are not a whole intent (see
// intentSumHead).
var errTornIntent = errors.New("torn intent")

// The intent reuses the catalog's own record codec (catalog.AppendOutputs:
// the outputs array as Marshal writes it, indented). The records are not
// validated again: the planner validated every record it plans to write
// (or read it from the catalog, validated then), and the catalog's commit
// validates them once more before anything records them for good.
func encodeIntent(doc intentDoc) ([]byte, error) {
	w := intentWire{Version: 1, BundleEventID: doc.EventID, PipelineID: doc.Owner.PipelineID,
		DestinationID: doc.Owner.DestinationID, Deletes: doc.Deletes, Reported: doc.Reported, AllowOlder: doc.AllowOlder}
	if doc.Source.ID != "" {
		w.Source = &doc.Source
	}
	if w.Deletes == nil {
		w.Deletes = []string{}
	}
	head, err := json.Marshal(w) // without writes (omitempty): spliced in here
	if err != nil {
		return nil, err
	}
	writes := doc.Writes
	if !slices.IsSortedFunc(writes, byPath) {
		// In path order, as a catalog holds them (recovery reads them as one).
		writes = slices.SortedFunc(slices.Values(writes), byPath)
	}
	sumAt := len(intentSumHead)
	bodyAt := sumAt + sha256.Size*2 + 2 // the digest, then `",`
	out := make([]byte, bodyAt, bodyAt+len(head)+16+len(writes)*512)
	out = append(append(out, head[1:len(head)-1]...), `,"writes":`...)
	out = append(catalog.AppendOutputs(out, writes), '}')
	sum := sha256.Sum256(out[bodyAt:])
	copy(out, intentSumHead)
	hex.Encode(out[sumAt:], sum[:])
	copy(out[bodyAt-2:], `",`)
	return out, nil
}

// checkIntentSum returns errTornIntent for bytes that are not a whole
// intent written with a checksum: they start with a NUL (a crash that
// left an extended file unwritten), end within the checksum's head, or
// carry a checksum that does not match. Bytes without the checksum (an intent of an earlier version,
// written atomically) pass unchecked.
func checkIntentSum(data []byte) error {
	if len(data) > 0 && data[0] == 0 || len(data) < len(intentSumHead) && strings.HasPrefix(intentSumHead, string(data)) {
		return errTornIntent
	}
	if !bytes.HasPrefix(data, []byte(intentSumHead)) {
		return nil
	}
	sumAt := len(intentSumHead)
	bodyAt := sumAt + sha256.Size*2 + 2
	if len(data) < bodyAt || string(data[bodyAt-2:bodyAt]) != `",` {
		return errTornIntent
	}
	want, err := hex.DecodeString(string(data[sumAt : bodyAt-2]))
	if sum := sha256.Sum256(data[bodyAt:]); err != nil || !bytes.Equal(sum[:], want) {
		return errTornIntent
	}
	return nil
}

func byPath(a, b catalog.Output) int { return strings.Compare(a.Path, b.Path) }

func decodeIntent(data []byte) (intentDoc, error) {
	if err := checkIntentSum(data); err != nil {
		return intentDoc{}, fmt.Errorf("%w %s: not a whole intent (its checksum does not match): remove it after checking the root", err, IntentPath)
	}
	var w intentWire
	if err := json.Unmarshal(data, &w); err != nil || w.Version != 1 {
		return intentDoc{}, fmt.Errorf("unreadable intent %s: remove it after checking the root (%v)", IntentPath, err)
	}
	wrapped, _ := json.Marshal(map[string]any{
		"schema_version": catalog.SchemaVersion, "created_at": catalog.FormatTime(epoch),
		"updated_at": catalog.FormatTime(epoch), "state": map[string]string{"mode": catalog.ModeCatalog},
		"outputs": w.Writes,
	})
	cat, _, err := catalog.Parse(wrapped)
	if err != nil {
		return intentDoc{}, fmt.Errorf("unreadable intent %s: %w", IntentPath, err)
	}
	doc := intentDoc{EventID: w.BundleEventID, Owner: catalog.Owner{PipelineID: w.PipelineID, DestinationID: w.DestinationID},
		Writes: cat.Outputs, Deletes: w.Deletes, Reported: w.Reported, AllowOlder: w.AllowOlder}
	if w.Source != nil {
		doc.Source = *w.Source
	}
	return doc, nil
}

// landed reports whether the object at rec.Path holds exactly rec's bytes.
// A path through a symlink holds none: its object is not in the root.
func landed(ctx context.Context, root storage.Backend, rec catalog.Output) (bool, error) {
	info, err := root.Stat(ctx, rec.Path)
	if errors.Is(err, storage.ErrNotExist) || errors.Is(err, storage.ErrSymlink) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if info.Size != rec.Size {
		return false, nil
	}
	if info.SHA256 != "" {
		return info.SHA256 == rec.SHA256, nil
	}
	sum, _, err := hashAndSize(ctx, root, rec.Path)
	if err != nil {
		return false, err
	}
	return sum == rec.SHA256, nil
}
