package consumer_test

import (
	"context"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// failingWrites makes the archive destination's output writes fail with
// errno, as storage/local reports it, for the first n writes. failures
// counts the failed writes.
func failingWrites(errno syscall.Errno, n int32, failures *atomic.Int32) func(d config.Destination, b storage.Backend) storage.Backend {
	var calls atomic.Int32
	return func(d config.Destination, b storage.Backend) storage.Backend {
		if d.ID != "archive" {
			return b
		}
		return &hooked{Backend: b, put: func(_ context.Context, p string) error {
			if calls.Add(1) > n {
				return nil
			}
			failures.Add(1)
			return local.Classify(d.Path, &fs.PathError{Op: "write", Path: catalog.TempPrefix + "x", Err: errno})
		}}
	}
}

// TestFullDiskRetried: a destination whose disk is full is retried with
// back-off (space may be freed) and published once it has room again.
func TestFullDiskRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var failures atomic.Int32
	opts := fastOptions()
	opts.BackOff = []time.Duration{100 * time.Millisecond}
	e.start(nodeConfig{opts: opts, wrap: failingWrites(syscall.ENOSPC, 1, &failures)})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"archive"}})
	res := e.wait(id, 1, 20*time.Second)
	info := e.settled(5 * time.Second)
	if r := res[0]; r.Type != events.TypePublished || r.Attempts != 2 || r.Written != 2 {
		t.Fatalf("archive: %s/%s attempts %d written %d (%s), want published on attempt 2", r.Type, r.Reason, r.Attempts, r.Written, r.Message)
	}
	if failures.Load() != 1 || info.Delivered.Consumer != 2 || len(e.results.of(id)) != 1 {
		t.Fatalf("%d failed writes, %d deliveries, %d results; want 1, 2, 1", failures.Load(), info.Delivered.Consumer, len(e.results.of(id)))
	}
	checkFiles(t, localRoot(t, e.roots["archive"]), map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
}

// TestReadOnlyDestinationDenied: a read-only destination gets exactly one
// failed/storage_denied event saying to remount it, at the first attempt:
// retrying cannot help until an operator acts.
func TestReadOnlyDestinationDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var failures atomic.Int32
	e.start(nodeConfig{opts: fastOptions(), wrap: failingWrites(syscall.EROFS, 1000, &failures)})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 2, 20*time.Second)
	info := e.settled(5 * time.Second)
	r := res[0]
	want := e.roots["archive"] + " is on a read-only file system: remount it read-write"
	if r.Type != events.TypeFailed || r.DestinationID != "archive" || r.Reason != events.ReasonStorageDenied || r.Attempts != 1 ||
		!strings.HasSuffix(r.Message, want) || r.Original == nil || r.Original.ID != id {
		t.Fatalf("archive: %s/%s attempts %d: %s\nwant failed/storage_denied on attempt 1 ending %q", r.Type, r.Reason, r.Attempts, r.Message, want)
	}
	if res[1].Type != events.TypePublished || res[1].DestinationID != "site" {
		t.Errorf("site: %s %s", res[1].Type, res[1].Message)
	}
	if info.Delivered.Consumer != 1 || len(e.results.of(id)) != 2 {
		t.Fatalf("%d deliveries, %d results; want 1 and 2", info.Delivered.Consumer, len(e.results.of(id)))
	}
}
