package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
)

// ErrUnknownVersion: a roll back names a version that the destination's
// history does not hold (or holds without what a roll back needs).
var ErrUnknownVersion = errors.New("unknown version")

// Version is a published version of one destination, to roll back to.
type Version struct {
	PipelineID    string
	DestinationID string

	// Bundle is the bundle's location; Digest its manifest's digest.
	Bundle string
	Digest string

	// Source is the version's identity, when known (from its published
	// event, or once its bundle is opened).
	Source *events.SourceRef

	// EventID is the published result event that first put it there
	// (empty when the version was named by its bundle alone); Time is
	// when.
	EventID string
	Time    time.Time

	// DeleteLater asks the roll back to an additive destination to also
	// delete the owner's paths that only later versions of the source
	// wrote (`rollback --delete-later`); by default they stay.
	DeleteLater bool
}

// Ref is what a roll back's rollback_of says: the published event it
// restores, or the digest when no event is known.
func (v Version) Ref() string {
	if v.EventID != "" {
		return v.EventID
	}
	return v.Digest
}

// String names the version for people: "src.one@2026-06-19T12:00:00Z
// sha256:1a2b3c4d5e6f", or the digest alone.
func (v Version) String() string {
	if v.Source != nil {
		return SourceLabel(v.Source.ID, v.Source.Digest, v.Source.Created)
	}
	return ShortDigest(v.Digest)
}

// SourceLabel is how the CLI shows a source version: "id@created" and the
// digest's first 12 hex digits.
func SourceLabel(id, digest string, created time.Time) string {
	return id + "@" + catalog.FormatTime(created) + " " + ShortDigest(digest)
}

// ShortDigest is "sha256:" and the first 12 hex digits of digest.
func ShortDigest(digest string) string {
	const n = len("sha256:") + 12
	if len(digest) > n {
		return digest[:n]
	}
	return digest
}

// minDigestPrefix is how many hex digits a digest given by its start must
// have.
const minDigestPrefix = 8

// IsDigestRef reports whether to names a manifest digest, whole or by its
// start ("sha256:" and at least 8 lowercase hex digits), rather than an
// event id.
func IsDigestRef(to string) bool {
	hex, ok := strings.CutPrefix(to, "sha256:")
	if !ok || len(hex) < minDigestPrefix || len(hex) > 64 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// FindVersion picks from a destination's history (its result events,
// newest first; events.History) the version to names: the id of a
// published result event or of the bundle event behind it, or a manifest
// digest (IsDigestRef), whose newest publication counts. pipeline, when
// not empty, restricts the search to that owner. The errors wrap
// ErrUnknownVersion and say what to do.
func FindVersion(history []events.Result, destination, pipeline, to string) (Version, error) {
	owner := destination
	if pipeline != "" {
		owner = pipeline + "/" + destination
	}
	if !IsDigestRef(to) {
		for _, r := range history {
			if r.ID != to && r.BundleEventID != to || pipeline != "" && r.PipelineID != pipeline {
				continue
			}
			if r.Type != events.TypePublished {
				continue // not a publication: said below
			}
			return versionOf(r, owner)
		}
		for _, r := range history {
			if (r.ID == to || r.BundleEventID == to) && (pipeline == "" || r.PipelineID == pipeline) {
				return Version{}, fmt.Errorf("%w: event %s is a %s result of %s, not a publication: roll back to a published version (`distributor history --destination %s` lists them)",
					ErrUnknownVersion, to, r.Type, owner, destination)
			}
		}
		return Version{}, fmt.Errorf("%w: no published event %s of %s in the events stream (it keeps results for nats.event_max_age, 30 days by default): `distributor history --destination %s` lists what it has; name a version by its digest (sha256:…) with --bundle to roll back to an older one",
			ErrUnknownVersion, to, owner, destination)
	}
	var found []events.Result
	digests, pipelines := map[string]bool{}, map[string]bool{}
	for _, r := range history {
		if r.Type != events.TypePublished || r.Source == nil || !strings.HasPrefix(r.Source.Digest, to) ||
			pipeline != "" && r.PipelineID != pipeline {
			continue
		}
		found = append(found, r)
		digests[r.Source.Digest], pipelines[r.PipelineID] = true, true
	}
	switch {
	case len(found) == 0:
		return Version{}, fmt.Errorf("%w: no published event of %s in the events stream has digest %s (it keeps results for nats.event_max_age, 30 days by default): `distributor history --destination %s` lists what it has; give --bundle LOCATION to roll back to that bundle anyway",
			ErrUnknownVersion, owner, to, destination)
	case len(digests) > 1:
		return Version{}, fmt.Errorf("%w: %s is the start of %d digests in the history of %s: give more of it", ErrUnknownVersion, to, len(digests), owner)
	case len(pipelines) > 1:
		return Version{}, fmt.Errorf("%w: pipelines %s all published %s to %s: give --pipeline", ErrUnknownVersion, strings.Join(slices.Sorted(maps.Keys(pipelines)), ", "), to, destination)
	}

	// The newest publication that names its bundle: events of versions
	// before bundle locations were recorded do not.
	for _, r := range found {
		if r.Bundle != "" {
			return versionOf(r, owner)
		}
	}
	return versionOf(found[0], owner)
}

// versionOf is the version a published result event put in place.
func versionOf(r events.Result, owner string) (Version, error) {
	if r.Source == nil {
		return Version{}, fmt.Errorf("%w: event %s published no output to %s: there is no version to roll back to", ErrUnknownVersion, r.ID, owner)
	}
	v := Version{PipelineID: r.PipelineID, DestinationID: r.DestinationID, Bundle: r.Bundle, Digest: r.Source.Digest,
		Source: r.Source, EventID: r.ID, Time: r.Time}
	if v.Bundle == "" {
		return v, fmt.Errorf("%w: event %s (%s) does not say where its bundle was (it was published before events recorded bundle locations): give --bundle LOCATION",
			ErrUnknownVersion, r.ID, v)
	}
	return v, nil
}

// CheckVersion opens v's bundle and checks that its manifest is the one
// published (v.Digest, or a digest starting with it): a roll back writes
// nothing unless its bundle is still there, unchanged. It returns v
// completed with the bundle's digest and source. The errors name the
// location.
func (s *Service) CheckVersion(ctx context.Context, v Version) (Version, *bundle.Bundle, error) {
	b, err := s.OpenBundle(ctx, Request{Bundle: v.Bundle})
	switch {
	case errors.Is(err, bundle.ErrNoManifest) || errors.Is(err, storage.ErrNotExist):
		return v, nil, fmt.Errorf("cannot roll back %s to %s: its bundle %s is gone (%w): restore it there, or give --bundle with the location of a copy",
			v.DestinationID, v, v.Bundle, bundle.ErrNoManifest)
	case err != nil:
		return v, nil, fmt.Errorf("cannot roll back %s to %s: %w", v.DestinationID, v, err)
	case !strings.HasPrefix(b.Digest, v.Digest):
		return v, nil, fmt.Errorf("cannot roll back %s to %s: %w: the bundle at %s has manifest digest %s now: it changed after it was published",
			v.DestinationID, v, bundle.ErrDigestMismatch, v.Bundle, b.Digest)
	}
	v.Digest = b.Digest
	v.Source = &events.SourceRef{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()}
	return v, b, nil
}

// Request is the publication that rolls back to v: its bundle, pinned to
// its digest, to its destination only, over newer versions (AllowOlder),
// marked as a roll back.
func (v Version) Request(bundleEventID string) Request {
	return Request{PipelineID: v.PipelineID, Bundle: v.Bundle, ManifestDigest: v.Digest, Destinations: []string{v.DestinationID},
		BundleEventID: bundleEventID, AllowOlder: true, DeleteLater: v.DeleteLater, RollbackOf: v.Ref()}
}

// Event is the operator's bundle-ready event that asks `serve` for the
// roll back (events.Publisher.AnnounceAsOperator).
func (v Version) Event(id string) events.BundleReady {
	return events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: id, PipelineID: v.PipelineID,
		Bundle: v.Bundle, ManifestDigest: v.Digest, Destinations: []string{v.DestinationID}, AllowOlder: true, DeleteLater: v.DeleteLater,
		RollbackOf: v.Ref()}
}
