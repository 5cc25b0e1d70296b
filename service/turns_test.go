package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage/local"
)

// countingLocker counts lease requests and the ones refused as held.
type countingLocker struct {
	lease.Locker
	calls, held atomic.Int32
}

func (c *countingLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	c.calls.Add(1)
	l, err := c.Locker.Acquire(ctx, root)
	if errors.Is(err, lease.ErrHeld) {
		c.held.Add(1)
	}
	return l, err
}

// TestPublicationsOfOneProcessIntoOneRootTakeTurns: with LeaseWait, the
// publications of one Runner into one root queue in process: each asks
// for the lease once and none meets it held (no polling), and all land.
// Without LeaseWait nothing waits.
func TestPublicationsOfOneProcessIntoOneRootTakeTurns(t *testing.T) {
	h := newHarness(t)
	locker := &countingLocker{Locker: h.Service.Locker}
	h.Service.Locker = locker
	h.Service.LeaseWait = 10 * time.Second
	root, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := config.Destination{Backend: "local", Path: root.String()}
	const n = 6
	want := map[string]string{}
	dirs := make([]string, n)
	for i := range n {
		pipe, dest := fmt.Sprintf("p%d", i), fmt.Sprintf("d%d", i)
		h.AddDest(named(base, dest, planner.Additive), root, pipe)
		files := map[string]string{fmt.Sprintf("%s/report.md", dest): fmt.Sprintf("# %d\n", i)}
		for p, c := range files {
			want[p] = c
		}
		dirs[i], _ = makeBundleAt(t, pipe+".src", t0, files)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = h.Publish(t1, fmt.Sprintf("p%d", i), fmt.Sprintf("d%d", i), dirs[i])
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publication %d: %v", i, err)
		}
	}
	if c, held := locker.calls.Load(), locker.held.Load(); c != n || held != 0 {
		t.Fatalf("%d lease requests, %d found it held; want %d and 0", c, held, n)
	}
	wantContents(t, root, want)
	assertDescribesStorage(t, root)
}
