package engine

import (
	"context"
	"errors"
	"fmt"
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

// stalledListing is a local root whose listing of the whole root, once
// armed, announces itself and then stalls until its context ends.
type stalledListing struct {
	*local.Backend
	armed   atomic.Bool
	started chan struct{}
	ended   chan error
}

func (s *stalledListing) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if prefix != "" || !s.armed.Load() {
		return s.Backend.List(ctx, prefix, fn)
	}
	close(s.started)
	<-ctx.Done()
	s.ended <- ctx.Err()
	return ctx.Err()
}

// TestListingStartsBesideAnOpeningBundleAndStopsWhenNotNeeded: a local
// root starts its listing while the publication's bundle is still being
// opened (a large manifest still parsing), before its outputs are known;
// once they turn out few against the catalog, the listing is stopped and
// the publication looks its paths up one by one instead.
func TestListingStartsBesideAnOpeningBundleAndStopsWhenNotNeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	lb, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := &stalledListing{Backend: lb, started: make(chan struct{}), ended: make(chan error, 1)}
	pubOf := func(files map[string]string, at time.Time) Publication {
		bdir := t.TempDir()
		testenv.WriteBundle(t, bdir, "src", at, files)
		bstore, _ := local.New(bdir)
		b, err := bundle.Open(ctx, bstore, bdir, "")
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
	e := &Engine{Now: func() time.Time { return now }, Version: "test", Workers: 2}
	many := map[string]string{}
	for i := range 1100 {
		many[fmt.Sprintf("old/f%04d.txt", i)] = "x"
	}
	if _, err := e.publish(ctx, root, alwaysHeld{}, pubOf(many, now.Add(-time.Hour)), nil); err != nil {
		t.Fatal(err)
	}

	root.armed.Store(true)
	full := pubOf(map[string]string{"new/a.txt": "a"}, now.Add(-time.Minute))
	opened := make(chan struct{})
	wait := func() (Publication, error) {
		defer close(opened)
		select {
		case <-root.started:
		case <-time.After(10 * time.Second):
			return Publication{}, errors.New("the root's listing did not start while the bundle was being opened")
		}
		return full, nil
	}
	res, err := e.publish(ctx, root, alwaysHeld{}, Publication{Owner: full.Owner, Workflow: full.Workflow, BundleEventID: full.BundleEventID},
		&opening{wait: wait, done: opened})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 1 || res.Written[0].Path != "new/a.txt" {
		t.Fatalf("written = %+v, want new/a.txt", res.Written)
	}
	if lerr := <-root.ended; !errors.Is(lerr, context.Canceled) {
		t.Fatalf("the listing ended with %v, want it stopped (context.Canceled)", lerr)
	}
}
