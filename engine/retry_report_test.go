package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

func pubFor(t *testing.T, bdir, destID, prefix, linkBase string) engine.Publication {
	t.Helper()
	ctx := context.Background()
	bstore, _ := local.New(bdir)
	b, err := bundle.Open(ctx, bstore, bdir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dest := config.Destination{ID: destID, Backend: "local", Workflow: planner.Additive,
		Layout:  config.Layout{Prefix: prefix},
		Publish: config.Publish{Sources: true, Include: []string{"**"}}}
	if linkBase != "" {
		dest.Links = config.Links{BaseURL: linkBase}
	}
	outs, err := service.Desire(ctx, dest, "p", b)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Publication{Owner: catalog.Owner{PipelineID: "p", DestinationID: destID}, Workflow: planner.Additive,
		Source:        catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created},
		BundleEventID: "ev-1", Outputs: outs, Bundle: b}
}

func mkBundle(t *testing.T, files map[string]string) string {
	bdir := t.TempDir()
	testenv.WriteBundle(t, bdir, "w.x", time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC), files)
	return bdir
}

// Two destinations of one event share a root. d1 fails after d1/a.txt
// landed; d2 runs in between. d2 must not report d1's file, and d1's retry
// must still report both of its files (the pending report survives d2).
func TestSharedRootRetryReportsOnlyItsOwnWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	lb, _ := local.New(root)
	bdir := mkBundle(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	e := &engine.Engine{Version: "test", Workers: 1}
	flaky := &failOncePut{Backend: lb, path: "d1/b.txt"}
	if _, err := e.Publish(ctx, flaky, heldLease{}, pubFor(t, bdir, "d1", "d1/", "")); err == nil {
		t.Fatal("want failure")
	}
	res, err := e.Publish(ctx, lb, heldLease{}, pubFor(t, bdir, "d2", "d2/", ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.Written {
		if it.Path[:3] != "d2/" {
			t.Errorf("destination d2 reports %s (written by d1) as its own write", it.Path)
		}
	}
	res, err = e.Publish(ctx, lb, heldLease{}, pubFor(t, bdir, "d1", "d1/", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 2 {
		t.Errorf("d1 retry reports written %d (unchanged %d); want d1/a.txt and d1/b.txt", len(res.Written), res.Unchanged)
	}
}

// A retry may change a landed output's record without a write (here the
// links base changed between attempts). If its intent then outlives the
// commit (a crash, or the intent delete failing), recovering it must not
// put the earlier attempt's record back.
func TestStaleIntentNeverRevertsANewerRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	lb, _ := local.New(root)
	bdir := mkBundle(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	e := &engine.Engine{Version: "test", Workers: 1}
	flaky := &failOncePut{Backend: lb, path: "b.txt"}
	if _, err := e.Publish(ctx, flaky, heldLease{}, pubFor(t, bdir, "d1", "", "https://old.example/")); err == nil {
		t.Fatal("want failure")
	}
	keep := &keepIntent{Backend: lb}
	if _, err := e.Publish(ctx, keep, heldLease{}, pubFor(t, bdir, "d1", "", "https://new.example/")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Recover(ctx, lb, heldLease{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(root, catalog.FileName))
	cat, _, _ := catalog.Parse(data)
	if o, _ := cat.Lookup("a.txt"); o.URL != "https://new.example/a.txt" {
		t.Errorf("a.txt url %q after recovery of the committed run's intent; want the new url", o.URL)
	}
}

// keepIntent fails the intent delete once (the warned-only path).
type keepIntent struct {
	storage.Backend
	n int
}

func (k *keepIntent) hookClearIntent(ctx context.Context, want storage.Version) error {
	k.n++
	if k.n == 2 {
		return storage.ErrUnavailable
	}
	return k.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

// A retry that rewrites a path an earlier attempt landed (the bundle was
// rebuilt) reports it once, with the bytes that are there now.
func TestRetryReportsARewrittenPathOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	lb, _ := local.New(root)
	bdir := mkBundle(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	e := &engine.Engine{Version: "test", Workers: 1}
	if _, err := e.Publish(ctx, &failOncePut{Backend: lb, path: "b.txt"}, heldLease{}, pubFor(t, bdir, "d1", "", "")); err == nil {
		t.Fatal("want failure")
	}
	os.RemoveAll(bdir)
	bdir2 := mkBundle(t, map[string]string{"a.txt": "A2\n", "b.txt": "b\n"})
	res, err := e.Publish(ctx, lb, heldLease{}, pubFor(t, bdir2, "d1", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, it := range res.Written {
		seen[it.Path]++
		if seen[it.Path] > 1 {
			t.Errorf("%s reported written twice: %+v", it.Path, res.Written)
		}
	}
}

// An output an earlier attempt wrote whose record this retry only updates
// (the links base changed) is reported once, as written, not also as updated.
func TestCarriedOutputIsNotAlsoReportedAsUpdated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	lb, _ := local.New(root)
	bdir := mkBundle(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	e := &engine.Engine{Version: "test", Workers: 1}
	if _, err := e.Publish(ctx, &failOncePut{Backend: lb, path: "b.txt"}, heldLease{}, pubFor(t, bdir, "d1", "", "https://old.example/")); err == nil {
		t.Fatal("want failure")
	}
	res, err := e.Publish(ctx, lb, heldLease{}, pubFor(t, bdir, "d1", "", "https://new.example/"))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, it := range res.Written {
		count[it.Path]++
	}
	for _, it := range res.Updated {
		count[it.Path]++
	}
	if count["a.txt"] != 1 || count["b.txt"] != 1 || len(count) != 2 {
		t.Fatalf("reported %v; want a.txt and b.txt once each (written %d, updated %d)", count, len(res.Written), len(res.Updated))
	}
	for _, it := range res.Written {
		if it.Path == "a.txt" && it.Record.URL != "https://new.example/a.txt" {
			t.Fatalf("a.txt reported with url %q, want the record this run left", it.Record.URL)
		}
	}
}

// An older additive bundle's retry does not report as its own a write of
// its first attempt that a newer version of the source has overwritten
// since: that path is kept for the newer version, not written.
func TestRetryDoesNotReportWritesANewerVersionOverwrote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lb, _ := local.New(t.TempDir())
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	older, newer := t.TempDir(), t.TempDir()
	testenv.WriteBundle(t, older, "w.x", at, map[string]string{"a.txt": "old a\n", "b.txt": "old b\n"})
	testenv.WriteBundle(t, newer, "w.x", at.Add(time.Hour), map[string]string{"a.txt": "new a\n"})
	v1, v2 := pubFor(t, older, "d", "", ""), pubFor(t, newer, "d", "", "")
	v2.BundleEventID = "ev-2"
	e := &engine.Engine{Version: "test", Workers: 1}
	if _, err := e.Publish(ctx, &failOncePut{Backend: lb, path: "b.txt"}, heldLease{}, v1); err == nil {
		t.Fatal("want the first attempt to fail")
	}
	if _, err := e.Publish(ctx, lb, heldLease{}, v2); err != nil {
		t.Fatal(err)
	}
	res, err := e.Publish(ctx, lb, heldLease{}, v1)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemPaths(res.Written); len(got) != 1 || got[0] != "b.txt" || res.KeptNewer != 1 {
		t.Fatalf("retry reports written %q, kept_newer %d; want b.txt written and a.txt kept", got, res.KeptNewer)
	}
	wantContents(t, lb, map[string]string{"a.txt": "new a\n", "b.txt": "old b\n"})
}

// Dispatch of the contract's calls to the hooks above.

func (k *keepIntent) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return k.hookClearIntent(ctx, want)
	}
	return k.Backend.DeleteIfVersion(ctx, p, want, opts...)
}

// A version superseded on its retry leaves no pending report behind: its
// first attempt failed after a write landed, a newer version of its source
// rolled that attempt forward (keeping the report for its retry) and
// published, and the retry's superseded result is the event's last.
func TestSupersededRetrySpendsItsPendingReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	lb, _ := local.New(dir)
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	older, newer := t.TempDir(), t.TempDir()
	testenv.WriteBundle(t, older, "w.x", at, map[string]string{"a.txt": "old a\n", "b.txt": "old b\n"})
	testenv.WriteBundle(t, newer, "w.x", at.Add(time.Hour), map[string]string{"a.txt": "new a\n"})
	v1, v2 := pubFor(t, older, "d", "", ""), pubFor(t, newer, "d", "", "")
	v1.Workflow, v2.Workflow = planner.Replacement, planner.Replacement
	v2.BundleEventID = "ev-2"
	e := &engine.Engine{Version: "test", Workers: 1}
	if _, err := e.Publish(ctx, &failOncePut{Backend: lb, path: "b.txt"}, heldLease{}, v1); err == nil {
		t.Fatal("want the first attempt to fail")
	}
	if _, err := e.Publish(ctx, lb, heldLease{}, v2); err != nil {
		t.Fatal(err)
	}
	var superseded *engine.SupersededError
	if _, err := e.Publish(ctx, lb, heldLease{}, v1); !errors.As(err, &superseded) {
		t.Fatalf("retry of the older version: %v, want superseded", err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, ".distributor", "reports")); len(left) != 0 {
		t.Fatalf("%d pending report(s) left after the superseded retry, want none", len(left))
	}
	wantContents(t, lb, map[string]string{"a.txt": "new a\n"})
}
