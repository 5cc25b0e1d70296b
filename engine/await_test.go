package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

type alwaysHeld struct{}

func (alwaysHeld) Token() string                 { return "1" }
func (alwaysHeld) Err() error                    { return nil }
func (alwaysHeld) Release(context.Context) error { return nil }
func (alwaysHeld) Confirm(context.Context) error { return nil }

// intentReads counts the reads of a root's intent.
type intentReads struct {
	*local.Backend
	n atomic.Int32
}

func (r *intentReads) hookReadIntent(ctx context.Context) ([]byte, storage.Version, error) {
	r.n.Add(1)
	return r.Backend.ReadVersion(ctx, IntentPath, storage.InPlace)
}

// TestEmptiedIntentDoesNotMakeAPublicationWaitForItsBundle: a publication
// whose bundle is still being opened waits for it before recovery only
// when an interrupted run left an intent. An intent emptied in place (a
// local root after any publication) is none: the publication reads the
// root (intent, catalog) while the bundle opens, as where the intent is
// removed.
func TestEmptiedIntentDoesNotMakeAPublicationWaitForItsBundle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	lb, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Now: func() time.Time { return now }, Version: "test", Workers: 1}
	if _, err := e.publish(ctx, lb, alwaysHeld{}, additivePublication(t, map[string]string{"a.txt": "a1\n"}, now.Add(-time.Hour)), nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(IntentPath))); err != nil || fi.Size() != 0 {
		t.Fatalf("after a publication the intent is emptied in place: %v", err)
	}
	full := additivePublication(t, map[string]string{"a.txt": "a2\n"}, now.Add(-time.Minute))
	root := &intentReads{Backend: lb}
	var readFirst bool
	await := func() (Publication, error) {
		readFirst = root.n.Load() > 0
		return full, nil
	}
	res, err := e.publish(ctx, root, alwaysHeld{}, Publication{Owner: full.Owner, Workflow: full.Workflow, BundleEventID: full.BundleEventID}, await)
	if err != nil || len(res.Written) != 1 {
		t.Fatalf("second publication: %v, %+v", err, res)
	}
	if !readFirst {
		t.Fatal("the publication waited for its bundle before it read the root: an emptied intent was taken for an interrupted run's")
	}
}

// additivePublication is an additive publication of files (a bundle of
// source "src" created at at) by pipeline p.x into destination "site".
func additivePublication(t *testing.T, files map[string]string, at time.Time) Publication {
	t.Helper()
	ctx := t.Context()
	bdir := t.TempDir()
	testenv.WriteBundle(t, bdir, "src", at, files)
	bstore, _ := local.New(bdir)
	b, err := bundle.Open(ctx, bstore, bdir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dest := config.Destination{ID: "site", Backend: "local", Workflow: planner.Additive,
		Publish: config.Publish{Sources: true, Include: []string{"**"}}}
	outs, err := Desire(ctx, dest, "p.x", b)
	if err != nil {
		t.Fatal(err)
	}
	return Publication{Owner: catalog.Owner{PipelineID: "p.x", DestinationID: "site"}, Workflow: planner.Additive,
		Source:        catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created},
		BundleEventID: "ev-" + at.Format("150405"), Outputs: outs, Bundle: b}
}

// Dispatch of the contract's calls to the hooks above.

func (r *intentReads) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == IntentPath && storage.HasOption(opts, storage.InPlace) {
		return r.hookReadIntent(ctx)
	}
	return r.Backend.ReadVersion(ctx, p, opts...)
}
