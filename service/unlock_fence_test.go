package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/enginetest"
)

// intentPausing holds the first WriteIntent until resumed: a serve
// process stopped (SIGSTOP) after planning and staging its writes.
type intentPausing struct {
	storage.Backend
	reached, resume chan struct{}
	paused          bool
}

func (p *intentPausing) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	if !p.paused {
		p.paused = true
		close(p.reached)
		<-p.resume
	}
	return p.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
}

// publishVia publishes the bundle in dir to dest through svc, as serve
// does for one event.
func publishVia(ctx context.Context, svc *service.Service, dest, dir string) (engine.Result, error) {
	req := service.Request{PipelineID: pipeA, Bundle: dir, Destinations: []string{dest}, BundleEventID: "ev-" + dir}
	b, err := svc.OpenBundle(ctx, req)
	if err != nil {
		return engine.Result{}, err
	}
	ds, err := svc.Destinations(req)
	if err != nil {
		return engine.Result{}, err
	}
	return svc.PublishTo(ctx, req, b, ds[0])
}

// Two serve processes share a root through the KV lease (with the lock
// object, as serve holds them). Process A is stopped with v1's writes
// staged; an operator breaks its leases with `distributor unlock --id`;
// process B publishes v2, which keeps v1's bytes on all paths but one;
// A resumes. A's publication fails with the lost lease (a retried
// failure, not published or superseded), no record names v1, and A's
// retry is superseded without recording any of its bytes.
func TestServeProcessUnlockedWhilePausedRecordsNothing(t *testing.T) {
	t.Parallel()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(context.Background(), js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		h := newHarness(t)
		plain, base := newRoot(t)
		d := h.AddDest(named(base, "site", planner.Replacement), plain, pipeA)
		v0, v1, v2 := map[string]string{}, map[string]string{}, map[string]string{}
		for i := range 12 {
			p := fmt.Sprintf("p%02d.txt", i)
			v0[p], v1[p], v2[p] = "v0 "+p+"\n", "v1 "+p+"\n", "v1 "+p+"\n"
		}
		v2["p05.txt"] = "v2 p05.txt\n"
		h.MustPublish(t1, pipeA, "site", "weatherreporter.v", v0)
		v1Dir, v1Digest := makeBundleAt(t, "weatherreporter.v", t0.Add(time.Minute), v1)
		v2Dir, _ := makeBundleAt(t, "weatherreporter.v", t0.Add(2*time.Minute), v2)
		h.Clock.Set(t2)

		serve := func(name string, stores service.Stores) *service.Service {
			return &service.Service{Engine: h.Service.Engine, Config: h.Config, Stores: stores,
				Locker: lease.Both(lease.NewKV(js, st.Leases, name, time.Minute), lease.NewStorageLocker(name, time.Minute))}
		}
		pausing := &intentPausing{Backend: plain, reached: make(chan struct{}), resume: make(chan struct{})}
		storesA := &enginetest.Stores{}
		storesA.Add(d, pausing)
		a, b := serve("proc-a", storesA), serve("proc-b", h.Stores)

		errA := make(chan error, 1)
		go func() {
			_, err := publishVia(ctx, a, "site", v1Dir)
			errA <- err
		}()
		select {
		case <-pausing.reached:
		case <-time.After(20 * time.Second):
			t.Fatal("process A never reached its intent")
		}
		held, err := lease.ReadKV(ctx, st.Leases, d.RootKey(), time.Now())
		if err != nil || held == nil {
			t.Fatalf("ReadKV: %+v, %v", held, err)
		}
		if _, err := lease.UnlockKV(ctx, st.Leases, d.RootKey(), held.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := lease.UnlockObject(ctx, plain, held.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := publishVia(ctx, b, "site", v2Dir); err != nil {
			t.Fatalf("process B: %v", err)
		}

		close(pausing.resume)
		err = <-errA
		wantNoRecordOf(t, plain, v1Digest, "after process A resumed")
		if out := service.Classify(err); !errors.Is(err, lease.ErrLost) || out.Type != events.TypeFailed || !out.Retry {
			t.Fatalf("process A: %v (%+v), want a retried failure for the lost lease", err, out)
		}

		// A's retry (redelivered) finds v2 newer: superseded, nothing of v1
		// recorded, the root exactly v2.
		if _, err := publishVia(ctx, a, "site", v1Dir); !errors.Is(err, engine.ErrSuperseded) {
			t.Fatalf("process A's retry: %v, want superseded", err)
		}
		wantNoRecordOf(t, plain, v1Digest, "after process A's retry")
		wantContents(t, plain, v2)
		assertDescribesStorage(t, plain)
	})
}

// Dispatch of the contract's calls to the hooks above.

func (p *intentPausing) WriteIfVersion(ctx context.Context, name string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if name == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return p.hookWriteIntent(ctx, data)
	}
	return p.Backend.WriteIfVersion(ctx, name, data, want, opts...)
}
