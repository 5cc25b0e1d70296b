package service_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// TestClassify: every sentinel error, wrapped as it occurs, has one
// outcome: retried or not, its reason code, its exit code; and the result
// event built from it carries the same type and reason, and exits the
// same way when `publish` reads it back.
func TestClassify(t *testing.T) {
	t.Parallel()
	const (
		published  = events.TypePublished
		superseded = events.TypeSuperseded
		collision  = events.TypeCollision
		failed     = events.TypeFailed
	)
	src := catalog.Source{ID: "w", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001"}
	for _, tc := range []struct {
		name   string
		err    error
		typ    string
		retry  bool
		reason string
		exit   int
	}{
		{"nil", nil, published, false, "", 0},
		{"superseded", fmt.Errorf("%w; use --allow-older to roll back", &engine.SupersededError{Root: "/r", Source: src, By: src}), superseded, false, "", 3},
		{"collision", fmt.Errorf("%w in /r: 2 unmanaged path(s) in the way", engine.ErrCollision), collision, false, "", 3},

		{"lease held", fmt.Errorf("%w: file:///r/ is held by host-1 since 10:00", lease.ErrHeld), failed, true, events.ReasonRefused, 3},
		{"lease lost", fmt.Errorf("%w: lease on file:///r/ expired or was taken over", lease.ErrLost), failed, true, events.ReasonRefused, 3},
		{"lease taken over", fmt.Errorf("%w: lock on /r was taken over by b (pid 7 on h): %w", lease.ErrLost, lease.ErrTakenOver), failed, true, events.ReasonRefused, 3},
		{"lock lost renewing on a failing store", fmt.Errorf("%w: lock on /r was not renewed: %w", lease.ErrLost, storage.ErrUnavailable), failed, true, events.ReasonRefused, 3},
		{"storage unavailable", fmt.Errorf("s3 put s3://b/r/a at http://s3: %w: %w", storage.ErrUnavailable, errors.New("503 SlowDown")), failed, true, events.ReasonStorage, 1},
		{"disk full", fmt.Errorf("put \"a\" in /r: %w", &diskErr{syscall.ENOSPC, storage.ErrUnavailable}), failed, true, events.ReasonStorage, 1},
		{"output changed since the plan", fmt.Errorf("%q was replaced: %w", "a", storage.ErrConflict), failed, true, events.ReasonStorage, 1},
		{"root changed", fmt.Errorf("destination root /r: %w than the one opened", storage.ErrRootChanged), failed, true, events.ReasonStorage, 1},
		{"catalog race", fmt.Errorf("commit /r: %w", engine.ErrCatalogRace), failed, true, events.ReasonStorage, 1},
		{"deadline", fmt.Errorf("s3 get s3://b/a: %w", context.DeadlineExceeded), failed, true, events.ReasonStorage, 1},
		{"cancelled", fmt.Errorf("put a: %w", context.Canceled), failed, true, events.ReasonStorage, 1},
		{"nats timeout", fmt.Errorf("acquire lease on file:///r/ in bucket L: %w", nats.ErrTimeout), failed, true, events.ReasonStorage, 1},
		{"nats no responders", fmt.Errorf("acquire lease: %w", nats.ErrNoResponders), failed, true, events.ReasonStorage, 1},
		{"nats closed", fmt.Errorf("acquire lease: %w", nats.ErrConnectionClosed), failed, true, events.ReasonStorage, 1},
		{"nats draining", fmt.Errorf("acquire lease: %w", nats.ErrConnectionDraining), failed, true, events.ReasonStorage, 1},
		{"nats reconnecting", fmt.Errorf("acquire lease: %w", nats.ErrConnectionReconnecting), failed, true, events.ReasonStorage, 1},
		{"nats disconnected", fmt.Errorf("acquire lease: %w", nats.ErrDisconnected), failed, true, events.ReasonStorage, 1},
		{"bundle read on a failing store", fmt.Errorf("bundle /b: read %q: %w", "a.txt", storage.ErrUnavailable), failed, true, events.ReasonStorage, 1},

		{"root missing", fmt.Errorf("open root: %w", storage.ErrRootMissing), failed, false, events.ReasonRootMissing, 1},
		{"read-only root", fmt.Errorf("put \"a\" in /r: %w", &diskErr{syscall.EROFS, storage.ErrDenied}), failed, false, events.ReasonStorageDenied, 1},
		{"s3 access denied", fmt.Errorf("s3 put s3://b/a: access denied: %w", storage.ErrDenied), failed, false, events.ReasonStorageDenied, 1},
		{"unknown pipeline", fmt.Errorf("%w %q", service.ErrUnknownPipeline, "p"), failed, false, events.ReasonUnknownPipeline, 2},
		{"unknown destination", fmt.Errorf("%w %q", service.ErrUnknownDestination, "d"), failed, false, events.ReasonUnknownDestination, 2},
		{"bundle not allowed", fmt.Errorf("%w: bundle /srv/other/b1 of pipeline %q lies outside them", config.ErrBundleNotAllowed, "p"), failed, false, events.ReasonBundleNotAllowed, 2},
		{"digest mismatch", fmt.Errorf("bundle /b: %w: the bundle changed", bundle.ErrDigestMismatch), failed, false, events.ReasonDigestMismatch, 1},
		{"content mismatch", fmt.Errorf("bundle /b: %w: %q", bundle.ErrContentMismatch, "a"), failed, false, events.ReasonContentMismatch, 1},
		{"no manifest", fmt.Errorf("bundle /b: %w", bundle.ErrNoManifest), failed, false, events.ReasonBundleMissing, 1},
		{"missing file", fmt.Errorf("bundle /b: %w: %q", bundle.ErrMissingFile, "a"), failed, false, events.ReasonBundleMissing, 1},
		{"bundle gone", fmt.Errorf("bundle /b: %w", storage.ErrNotExist), failed, false, events.ReasonBundleMissing, 1},
		{"invalid manifest", fmt.Errorf("bundle /b: %w: files[0]", bundle.ErrInvalidManifest), failed, false, events.ReasonInvalidEvent, 2},
		{"created in the future", fmt.Errorf("bundle /b: %w: created 2099-01-01T00:00:00Z", bundle.ErrFutureCreated), failed, false, events.ReasonInvalidBundle, 2},
		{"bad location", fmt.Errorf("%w %q: no bucket", bundle.ErrBadLocation, "s3://"), failed, false, events.ReasonInvalidEvent, 2},
		{"two outputs one path", fmt.Errorf("/r: %w: %q", planner.ErrDuplicateOutput, "index.html"), failed, false, events.ReasonInvalidEvent, 2},
		{"output under another", fmt.Errorf("/r: %w: %q", planner.ErrPathConflict, "a/b"), failed, false, events.ReasonInvalidEvent, 2},
		{"owner selection", fmt.Errorf("%w: pass an owner", planner.ErrSelector), failed, false, events.ReasonInvalidEvent, 2},
		{"configuration", fmt.Errorf("%w: line 3", config.ErrInvalid), failed, false, events.ReasonInvalidEvent, 2},
		{"invalid catalog", fmt.Errorf("/r/.distributor.json: %w: line 1", catalog.ErrInvalid), failed, false, events.ReasonInvalidCatalog, 3},
		{"newer catalog", fmt.Errorf("/r/.distributor.json: %w", catalog.ErrNewer), failed, false, events.ReasonNewerCatalog, 3},
		{"empty replacement", fmt.Errorf("/r: %w", planner.ErrEmptyReplacement), failed, false, events.ReasonRefused, 3},
		{"too many deletes", fmt.Errorf("/r: %w (12 > 10)", planner.ErrTooManyDeletes), failed, false, events.ReasonRefused, 3},
		{"legacy catalog", fmt.Errorf("/r: %w", engine.ErrLegacyCatalog), failed, false, events.ReasonRefused, 3},
		{"unlock with another id", fmt.Errorf("%w: the lock object of /r has id %q, not %q", lease.ErrWrongID, "a", "b"), failed, false, events.ReasonRefused, 3},
		{"symlink in the root", fmt.Errorf("write a/b in /r: %w; remove the symlink(s) [\"a\"]", storage.ErrSymlink), failed, false, events.ReasonRefused, 3},
		{"anything else", errors.New("boom"), failed, false, events.ReasonInternal, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := service.Classify(tc.err)
			want := service.Outcome{Type: tc.typ, Retry: tc.retry, Reason: tc.reason, ExitCode: tc.exit}
			if o != want {
				t.Fatalf("Classify(%v) = %+v, want %+v", tc.err, o, want)
			}
			ev := events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: "e1", PipelineID: "weather.daily",
				Bundle: "/b", ManifestDigest: src.Digest}
			r := service.ResultEvent("d", engine.Result{}, tc.err, service.Delivery{Event: ev, Attempt: 2})
			if r.Type != tc.typ || r.Reason != tc.reason || r.Attempts != 2 || r.BundleEventID != "e1" || r.DestinationID != "d" {
				t.Fatalf("event %s/%s attempts %d, want %s/%s", r.Type, r.Reason, r.Attempts, tc.typ, tc.reason)
			}
			if tc.err != nil && r.Message != tc.err.Error() {
				t.Fatalf("message %q, want %q", r.Message, tc.err.Error())
			}
			if got := service.ResultExitCode(r); got != tc.exit {
				t.Fatalf("ResultExitCode(%s/%s) = %d, want %d (as the error)", r.Type, r.Reason, got, tc.exit)
			}
			// Failures and collisions keep the original for replay.
			if (r.Original != nil) != (tc.typ == failed || tc.typ == collision) {
				t.Fatalf("original %v for a %s event", r.Original, r.Type)
			}
			// Only a retried failure runs out of deliveries.
			if last := service.ResultEvent("d", engine.Result{}, tc.err, service.Delivery{Event: ev, Attempt: 5, Exhausted: tc.retry}); tc.retry &&
				(last.Reason != events.ReasonMaxDeliveries || service.ResultExitCode(last) != 1) {
				t.Fatalf("last delivery: %s/%s, want failed/max_deliveries", last.Type, last.Reason)
			}
			r.SchemaVersion, r.ID, r.Time = events.SchemaVersion, "e1.d", time.Now()
			if err := r.Validate(); err != nil {
				t.Fatalf("event does not validate: %v", err)
			}
		})
	}
	if errors.Is(storage.ErrRootMissing, storage.ErrNotExist) {
		t.Error("ErrRootMissing must not read as a missing bundle")
	}
}

// diskErr is an OS error as storage/local returns it: the *fs.PathError
// and the storage sentinel it maps to.
type diskErr struct {
	errno syscall.Errno
	kind  error
}

func (e *diskErr) Error() string {
	return (&fs.PathError{Op: "write", Path: "a", Err: e.errno}).Error()
}
func (e *diskErr) Unwrap() []error {
	return []error{&fs.PathError{Op: "write", Path: "a", Err: e.errno}, e.kind}
}
