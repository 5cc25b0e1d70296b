package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
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
	e := &Engine{Now: func() time.Time { return now }, Version: "test", Workers: 2}
	many := map[string]string{}
	for i := range 1100 {
		many[fmt.Sprintf("old/f%04d.txt", i)] = "x"
	}
	if _, err := e.publish(ctx, root, alwaysHeld{}, additivePublication(t, many, now.Add(-time.Hour)), nil); err != nil {
		t.Fatal(err)
	}

	root.armed.Store(true)
	full := additivePublication(t, map[string]string{"new/a.txt": "a"}, now.Add(-time.Minute))
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
