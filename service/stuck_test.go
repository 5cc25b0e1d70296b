package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// stuckReads is a bundle store whose file reads (the manifest aside) hang
// until their context ends, like a read from a server that stopped
// sending; reading is closed when the first one starts.
type stuckReads struct {
	storage.Backend
	once    sync.Once
	reading chan struct{}
}

func (s *stuckReads) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if p == bundle.ManifestName {
		return s.Backend.Open(ctx, p, opts...)
	}
	s.once.Do(func() { close(s.reading) })
	<-ctx.Done()
	return storage.Reader{}, fmt.Errorf("read %s: %w", p, ctx.Err())
}

// losableLocker hands out leases that are held until lose is called.
type losableLocker struct{ lost atomic.Bool }

func (l *losableLocker) Acquire(context.Context, lease.Root) (lease.Lease, error) {
	return losableLease{l}, nil
}

func (l *losableLocker) lose() { l.lost.Store(true) }

type losableLease struct{ l *losableLocker }

func (losableLease) Token() string                   { return "1" }
func (losableLease) Release(context.Context) error   { return nil }
func (s losableLease) Confirm(context.Context) error { return s.Err() }
func (s losableLease) Err() error {
	if s.l.lost.Load() {
		return fmt.Errorf("%w: the test took it away", lease.ErrLost)
	}
	return nil
}

// stuckEnv is a Service over local destination roots whose bundle store
// the test may wrap, and a log that the test reads. It needs nothing of
// the shared harness but newLocalRoot and makeBundle.
type stuckEnv struct {
	svc   *service.Service
	cfg   *config.Config
	roots map[string]storage.Backend
	wrap  func(storage.Backend) storage.Backend
	logs  *syncBuffer
}

func newStuckEnv(t *testing.T, dests int) (*stuckEnv, []config.Destination) {
	t.Helper()
	e := &stuckEnv{cfg: &config.Config{}, roots: map[string]storage.Backend{}, logs: &syncBuffer{}}
	p := config.Pipeline{ID: pipeA}
	var ds []config.Destination
	for i := range dests {
		root, d := newLocalRoot(t)
		d.ID, d.Workflow, d.Publish.Sources = fmt.Sprintf("d%02d", i), "replacement", true
		e.roots[d.RootKey()] = root
		e.cfg.Destinations = append(e.cfg.Destinations, d)
		p.Destinations = append(p.Destinations, d.ID)
		ds = append(ds, d)
	}
	e.cfg.Pipelines = []config.Pipeline{p}
	e.svc = &service.Service{
		Engine: &engine.Engine{Version: "test", Workers: 4, Log: zerolog.New(e.logs)},
		Config: e.cfg, Stores: e, Locker: lease.NewStorageLocker("stuck-test", time.Minute),
	}
	return e, ds
}

func (e *stuckEnv) Destination(_ context.Context, d config.Destination) (storage.Backend, error) {
	return e.roots[d.RootKey()], nil
}

func (e *stuckEnv) Bundle(_ context.Context, location string) (storage.Backend, error) {
	b, err := local.New(location)
	if err != nil || e.wrap == nil {
		return b, err
	}
	return e.wrap(b), nil
}

// publish runs Service.Publish of the bundle in dir to dests.
func (e *stuckEnv) publish(dir string, dests []config.Destination) []service.Done {
	req := service.Request{PipelineID: pipeA, Bundle: dir, BundleEventID: "ev-" + filepath.Base(dir)}
	_, done := e.svc.Publish(context.Background(), req, dests)
	return done
}

// stuckEnvReads is a stuckEnv with one destination whose bundle's file
// reads hang, and the bundle.
func stuckEnvReads(t *testing.T) (*stuckEnv, config.Destination, string, *stuckReads) {
	t.Helper()
	e, ds := newStuckEnv(t, 1)
	stuck := &stuckReads{reading: make(chan struct{})}
	e.wrap = func(b storage.Backend) storage.Backend { stuck.Backend = b; return stuck }
	dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	return e, ds[0], dir, stuck
}

// publishBounded runs the publication of dir to d in the background and
// returns its error, or fails the test when it still runs after limit.
func publishBounded(t *testing.T, e *stuckEnv, d config.Destination, dir string, limit time.Duration, during func()) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- e.publish(dir, []config.Destination{d})[0].Err }()
	during()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("the publication still runs %v later: its stuck storage call was not cancelled", limit)
		return nil
	}
}

// A lease lost while a storage call hangs cancels that call at once: the
// publication fails as lease lost (a retry for serve) instead of hanging
// until the server answers, and the log says so as it happens.
func TestALostLeaseCancelsAStuckStorageCall(t *testing.T) {
	t.Parallel()
	e, d, dir, stuck := stuckEnvReads(t)
	locker := &losableLocker{}
	e.svc.Locker = locker
	logs := e.logs
	err := publishBounded(t, e, d, dir, 10*time.Second, func() {
		<-stuck.reading
		locker.lose()
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("publication whose lease was lost mid-read: %v, want lease.ErrLost", err)
	}
	if o := service.Classify(err); !o.Retry {
		t.Errorf("outcome %+v, want a retry", o)
	}
	if !strings.Contains(logs.String(), `"level":"warn"`) || !strings.Contains(logs.String(), "lease lost; cancelling") {
		t.Errorf("log %q, want a warning about the lost lease", logs.String())
	}
}

// A publication that runs past Service.Timeout (publication_timeout)
// has its storage calls cancelled and fails with an error naming the
// limit, logged as it happens.
func TestAPublicationPastItsTimeoutFailsNamingIt(t *testing.T) {
	t.Parallel()
	e, d, dir, stuck := stuckEnvReads(t)
	e.svc.Timeout = 300 * time.Millisecond
	logs := e.logs
	err := publishBounded(t, e, d, dir, 10*time.Second, func() { <-stuck.reading })
	var de *service.DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.HasPrefix(err.Error(), "the publication did not finish within 300ms (publication_timeout): ") {
		t.Fatalf("publication past its timeout: %v, want a DeadlineError naming publication_timeout", err)
	}
	if o := service.Classify(err); !o.Retry {
		t.Errorf("outcome %+v, want a retry", o)
	}
	if !strings.Contains(logs.String(), "publication timed out; cancelling") {
		t.Errorf("log %q, want a warning about the timeout", logs.String())
	}
}

// overlapLocker counts the leases held at once, and the most.
type overlapLocker struct {
	inner      lease.Locker
	held, most atomic.Int32
}

func (c *overlapLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	l, err := c.inner.Acquire(ctx, root)
	if err != nil {
		return nil, err
	}
	n := c.held.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(5 * time.Millisecond) // the others get their chance to overlap
	return overlapLease{l, c}, nil
}

type overlapLease struct {
	lease.Lease
	c *overlapLocker
}

func (l overlapLease) Release(ctx context.Context) error {
	l.c.held.Add(-1)
	return l.Lease.Release(ctx)
}

// One event fanned out to many destinations holds at most Parallel
// (destination_parallelism) leases at a time.
func TestPublishHoldsAtMostParallelLeases(t *testing.T) {
	t.Parallel()
	e, dests := newStuckEnv(t, 24)
	locker := &overlapLocker{inner: e.svc.Locker}
	e.svc.Locker, e.svc.Parallel = locker, 3
	dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	for _, dd := range e.publish(dir, dests) {
		if dd.Err != nil {
			t.Fatalf("%s: %v", dd.Destination.ID, dd.Err)
		}
	}
	if most := locker.most.Load(); most > 3 || most < 2 {
		t.Errorf("%d leases held at once, want at most Parallel = 3 (and some overlap)", most)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
