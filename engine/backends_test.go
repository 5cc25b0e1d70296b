package engine_test

// The backend matrix: every test in rules_test.go and maintenance_test.go
// runs once on a local folder and once on a prefix of a bucket on the
// in-process S3 server, through service.Service with the direct-mode lock
// object in the root (lease.StorageLocker), so the S3 conditional writes
// are exercised by the lock as well as by the catalog.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// s3Prefix is the key prefix of every S3 test root inside its bucket.
const s3Prefix = "site/"

// backendEnv makes fresh destination roots on one kind of backend.
type backendEnv struct {
	// NewRoot returns a fresh, empty root and a destination whose Backend,
	// Path and Bucket name it (so RootKey identifies it).
	NewRoot func(t *testing.T) (storage.Backend, config.Destination)
	// Outside returns a backend on the storage that holds d's root but
	// outside it: the parent folder, or the bucket without the prefix.
	Outside func(t *testing.T, d config.Destination) storage.Backend
}

// forEachBackend runs fn as one subtest per backend kind.
func forEachBackend(t *testing.T, fn func(t *testing.T, newRoot func(t *testing.T) (storage.Backend, config.Destination))) {
	t.Helper()
	forEachBackendEnv(t, func(t *testing.T, env backendEnv) { fn(t, env.NewRoot) })
}

// forEachBackendEnv is forEachBackend with access to the storage around a root.
func forEachBackendEnv(t *testing.T, fn func(t *testing.T, env backendEnv)) {
	t.Helper()
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		fn(t, backendEnv{
			NewRoot: func(t *testing.T) (storage.Backend, config.Destination) {
				return newLocalRoot(t)
			},
			Outside: func(t *testing.T, d config.Destination) storage.Backend {
				b, err := local.New(filepath.Dir(d.Path))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		srv := testenv.NewS3(t)
		fn(t, backendEnv{
			NewRoot: func(t *testing.T) (storage.Backend, config.Destination) {
				bucket := srv.Bucket(t)
				return srv.Backend(t, bucket, s3Prefix), config.Destination{
					Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
					Region: "us-east-1", Endpoint: srv.URL, PathStyle: true,
				}
			},
			Outside: func(t *testing.T, d config.Destination) storage.Backend {
				return srv.Backend(t, d.Bucket, "")
			},
		})
	})
}

// countingBackend counts the calls made through it, per method and path.
type countingBackend struct {
	storage.Backend
	mu    sync.Mutex
	calls map[string][]string // method -> paths, in call order
}

func newCounting(b storage.Backend) *countingBackend {
	return &countingBackend{Backend: b, calls: map[string][]string{}}
}

func (c *countingBackend) record(method string, paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method] = append(c.calls[method], paths...)
}

// Calls returns the paths method was called with, sorted, leaving out
// the lock object (the lease's own traffic).
func (c *countingBackend) Calls(method string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []string{}
	for _, p := range c.calls[method] {
		if p != lease.LockPath {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Total counts every call so far, the lock object's included.
func (c *countingBackend) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for m, paths := range c.calls {
		if m != "PutDurable" { // a kind of Put, already counted
			n += len(paths)
		}
	}
	return n
}

// Reset forgets every call so far.
func (c *countingBackend) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[string][]string{}
}

func (c *countingBackend) Stat(ctx context.Context, p string) (storage.ObjectInfo, error) {
	c.record("Stat", p)
	return c.Backend.Stat(ctx, p)
}

func (c *countingBackend) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	c.record("Open", p)
	return c.Backend.Open(ctx, p)
}

func (c *countingBackend) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	c.record("List", prefix)
	return c.Backend.List(ctx, prefix, fn)
}

func (c *countingBackend) ReadVersion(ctx context.Context, p string) ([]byte, storage.Version, error) {
	c.record("ReadVersion", p)
	return c.Backend.ReadVersion(ctx, p)
}

func (c *countingBackend) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	c.record("Put", p)
	if !o.DeferSync {
		c.record("PutDurable", p) // a flush of its own (local: two fsyncs)
	}
	return c.Backend.Put(ctx, p, r, size, o)
}

// Stage counts a staged Put as a Put, its Commit as a Commit.
func (c *countingBackend) Stage(ctx context.Context) storage.Stage {
	return &countingStage{Stage: c.Backend.Stage(ctx), c: c}
}

type countingStage struct {
	storage.Stage
	c *countingBackend
}

func (s *countingStage) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	s.c.record("Put", p)
	if !o.DeferSync {
		s.c.record("PutDurable", p)
	}
	return s.Stage.Put(ctx, p, r, size, o)
}

func (s *countingStage) Commit(ctx context.Context, p string) (storage.ObjectInfo, error) {
	s.c.record("Commit", p)
	return s.Stage.Commit(ctx, p)
}

// Find records the paths it is asked about ("*": every object); how the
// backend finds them (lookups, a listing) is its own.
func (c *countingBackend) Find(ctx context.Context, q storage.Query, fn func(storage.ObjectInfo) error) error {
	if q.Paths == nil {
		c.record("Find", "*")
	} else {
		c.record("Find", q.Paths...)
	}
	return c.Backend.Find(ctx, q, fn)
}

func (c *countingBackend) ReadIntent(ctx context.Context) ([]byte, storage.Version, error) {
	c.record("ReadIntent", "")
	return c.Backend.ReadIntent(ctx)
}

func (c *countingBackend) WriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	c.record("WriteIntent", "")
	return c.Backend.WriteIntent(ctx, data)
}

func (c *countingBackend) ClearIntent(ctx context.Context, want storage.Version) error {
	c.record("ClearIntent", "")
	return c.Backend.ClearIntent(ctx, want)
}

// PrepareCatalog counts the commit of the catalog as "CommitCatalog".
func (c *countingBackend) PrepareCatalog(ctx context.Context, next *catalog.Catalog, writes int) storage.PendingCatalog {
	return countingCatalog{c.Backend.PrepareCatalog(ctx, next, writes), c}
}

type countingCatalog struct {
	storage.PendingCatalog
	c *countingBackend
}

func (cc countingCatalog) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	cc.c.record("CommitCatalog", catalog.FileName)
	return cc.PendingCatalog.Commit(ctx, want)
}

func (c *countingBackend) Overwrite(ctx context.Context, p string, data []byte) error {
	c.record("Overwrite", p)
	return c.Backend.Overwrite(ctx, p, data)
}

func (c *countingBackend) Delete(ctx context.Context, paths ...string) error {
	c.record("Delete", paths...)
	return c.Backend.Delete(ctx, paths...)
}

func (c *countingBackend) WriteIfVersion(ctx context.Context, p string, d []byte, v storage.Version) (storage.Version, error) {
	c.record("WriteIfVersion", p)
	return c.Backend.WriteIfVersion(ctx, p, d, v)
}

func (c *countingBackend) DeleteIfVersion(ctx context.Context, p string, v storage.Version) error {
	c.record("DeleteIfVersion", p)
	return c.Backend.DeleteIfVersion(ctx, p, v)
}

// testStores is the service.Stores of the tests: destination roots registered
// by RootKey, bundle folders opened on the local disk, optionally wrapped.
type testStores struct {
	mu    sync.Mutex
	roots map[string]storage.Backend
	// wrapBundle, when set, wraps every bundle store it opens.
	wrapBundle func(storage.Backend) storage.Backend
}

func (s *testStores) add(d config.Destination, b storage.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roots == nil {
		s.roots = map[string]storage.Backend{}
	}
	s.roots[d.RootKey()] = b
}

func (s *testStores) setWrapBundle(wrap func(storage.Backend) storage.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrapBundle = wrap
}

func (s *testStores) Destination(_ context.Context, d config.Destination) (storage.Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.roots[d.RootKey()]
	if !ok {
		return nil, fmt.Errorf("test stores: no root registered for destination %q (%s)", d.ID, d.RootKey())
	}
	return b, nil
}

func (s *testStores) Bundle(_ context.Context, location string) (storage.Backend, error) {
	loc, err := bundle.ParseLocation(location)
	if err != nil {
		return nil, err
	}
	if loc.Scheme != "file" {
		return nil, fmt.Errorf("test stores: only local bundles, not %s", location)
	}
	b, err := local.New(loc.Path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	wrap := s.wrapBundle
	s.mu.Unlock()
	if wrap != nil {
		return wrap(b), nil
	}
	return b, nil
}

// clock is a settable Engine.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Times used throughout: bundles are created at t0, publications run later.
var (
	t0 = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	t1 = time.Date(2026, 6, 19, 12, 5, 0, 0, time.UTC)
	t2 = time.Date(2026, 6, 19, 12, 10, 0, 0, time.UTC)
)

// Pipelines and destinations of the harness.
const (
	pipeA = "weatherreporter.daily"
	pipeB = "tides.hourly"
)

// harness is a Runner over test stores with a controlled clock.
type harness struct {
	t      *testing.T
	clock  *clock
	stores *testStores
	cfg    *config.Config
	runner *service.Service
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: &clock{t: t1}, stores: &testStores{}, cfg: &config.Config{}}
	h.runner = &service.Service{
		Engine: &engine.Engine{Now: h.clock.Now, Version: "test", Workers: 4},
		Config: h.cfg,
		Stores: h.stores,
		Locker: lease.NewStorageLocker("engine-test", time.Minute),
	}
	return h
}

// addDest registers destination d (whose Backend/Path/Bucket come from
// newRoot) on root, published to by the pipelines named.
func (h *harness) addDest(d config.Destination, root storage.Backend, pipelines ...string) config.Destination {
	h.t.Helper()
	if d.ID == "" {
		h.t.Fatal("destination needs an id")
	}
	if d.Workflow == "" {
		d.Workflow = "additive"
	}
	if !d.Publish.Sources && !d.Publish.HTML {
		d.Publish.Sources = true
	}
	h.cfg.Destinations = append(h.cfg.Destinations, d)
	for _, id := range pipelines {
		found := false
		for i := range h.cfg.Pipelines {
			if h.cfg.Pipelines[i].ID == id {
				h.cfg.Pipelines[i].Destinations = append(h.cfg.Pipelines[i].Destinations, d.ID)
				found = true
			}
		}
		if !found {
			h.cfg.Pipelines = append(h.cfg.Pipelines, config.Pipeline{ID: id, Destinations: []string{d.ID}})
		}
	}
	h.stores.add(d, root)
	return d
}

// makeBundle writes files into a fresh folder with a manifest for source id
// (created at t0) and returns the folder and the manifest's digest.
func makeBundle(t *testing.T, id string, files map[string]string) (string, string) {
	t.Helper()
	return makeBundleAt(t, id, t0, files)
}

// makeBundleAt is makeBundle with the manifest created at created.
func makeBundleAt(t *testing.T, id string, created time.Time, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	return dir, testenv.WriteBundle(t, dir, id, created, files)
}

// publish runs Runner.Publish of the bundle in dir for pipeline to dest at
// time now, as the consumer or `apply` would.
func (h *harness) publish(now time.Time, pipeline, dest, dir string, mod ...func(*service.Request)) (engine.Result, error) {
	ctx := context.Background()
	h.clock.Set(now)
	req := service.Request{PipelineID: pipeline, Bundle: dir, Destinations: []string{dest}, BundleEventID: "ev-" + filepath.Base(dir)}
	for _, m := range mod {
		m(&req)
	}
	b, err := h.runner.OpenBundle(ctx, req)
	if err != nil {
		return engine.Result{}, err
	}
	// No t.Fatal here: concurrency tests call publish from goroutines.
	ds, err := h.runner.Destinations(req)
	if err != nil {
		return engine.Result{}, err
	}
	if len(ds) != 1 {
		return engine.Result{}, fmt.Errorf("request resolves to %d destinations, want 1", len(ds))
	}
	return h.runner.PublishTo(ctx, req, b, ds[0])
}

// mustPublish publishes a new bundle of files and fails the test on error.
func (h *harness) mustPublish(now time.Time, pipeline, dest, sourceID string, files map[string]string) engine.Result {
	h.t.Helper()
	// Made an hour before it is published: later publications are newer
	// versions, and all of them are older than makeBundle's (created t0)
	// for publications up to t0 + 1h.
	dir, _ := makeBundleAt(h.t, sourceID, now.Add(-time.Hour), files)
	res, err := h.publish(now, pipeline, dest, dir)
	if err != nil {
		h.t.Fatalf("publish %s to %s: %v", sourceID, dest, err)
	}
	return res
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return catalog.Digest(sum[:])
}

// readCatalog reads and parses the root's catalog; nil when absent.
func readCatalog(t *testing.T, root storage.Backend) (*catalog.Catalog, storage.Version) {
	t.Helper()
	data, v, err := root.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if v == "" {
		return nil, ""
	}
	cat, legacy, err := catalog.Parse(data)
	if err != nil {
		t.Fatalf("catalog in %s: %v", root, err)
	}
	if legacy {
		t.Fatalf("catalog in %s is legacy", root)
	}
	return cat, v
}

// catalogVersion is the catalog's current version ("" when absent).
func catalogVersion(t *testing.T, root storage.Backend) storage.Version {
	t.Helper()
	_, v, err := root.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// contents returns every object in the root outside the reserved space
// (.distributor.json and .distributor/) with its bytes.
func contents(t *testing.T, root storage.Backend) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := root.List(ctx, "", func(o storage.ObjectInfo) error {
		if catalog.IsReserved(o.Path) {
			return nil
		}
		data, err := readObject(ctx, root, o.Path)
		out[o.Path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readObject(ctx context.Context, root storage.Backend, p string) ([]byte, error) {
	rc, err := root.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustRead(t *testing.T, root storage.Backend, p string) string {
	t.Helper()
	data, err := readObject(context.Background(), root, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustPut(t *testing.T, root storage.Backend, p, content string) {
	t.Helper()
	if _, err := root.Put(context.Background(), p, strings.NewReader(content), int64(len(content)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// assertDescribesStorage checks that the catalog and the root agree
// exactly: every record's object exists with the recorded size and digest,
// every non-reserved object has a record, and no intent is left.
func assertDescribesStorage(t *testing.T, root storage.Backend) *catalog.Catalog {
	t.Helper()
	cat, _ := readCatalog(t, root)
	if cat == nil {
		cat = &catalog.Catalog{}
	}
	stored := contents(t, root)
	index := cat.Index()
	for p, rec := range index {
		data, ok := stored[p]
		switch {
		case !ok:
			t.Errorf("record %s has no object", p)
		case int64(len(data)) != rec.Size || digestOf([]byte(data)) != rec.SHA256:
			t.Errorf("record %s says %s/%d, the object is %s/%d", p, rec.SHA256, rec.Size, digestOf([]byte(data)), len(data))
		}
	}
	for p := range stored {
		if _, ok := index[p]; !ok {
			t.Errorf("object %s has no record", p)
		}
	}
	// A local root keeps its intent file, emptied (rewritten in place).
	if data, _, err := root.ReadVersion(context.Background(), engine.IntentPath); err != nil || len(data) != 0 {
		t.Errorf("intent %s: %d bytes, err = %v; want it gone or empty", engine.IntentPath, len(data), err)
	}
	return cat
}

// recordPaths returns the record paths of cat, in catalog (path) order.
func recordPaths(cat *catalog.Catalog) []string {
	out := []string{}
	if cat == nil {
		return out
	}
	for _, o := range cat.Outputs {
		out = append(out, o.Path)
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// flipByte overwrites the object at p with the same bytes but one flipped,
// directly through the backend (behind distributor's back).
func flipByte(t *testing.T, root storage.Backend, p string) {
	t.Helper()
	data := []byte(mustRead(t, root, p))
	if len(data) == 0 {
		t.Fatalf("%s is empty", p)
	}
	data[len(data)/2] ^= 0x01
	if _, err := root.Put(context.Background(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestBackendMatrixRootsAreFreshAndKeyed(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot func(t *testing.T) (storage.Backend, config.Destination)) {
		r1, d1 := newRoot(t)
		r2, d2 := newRoot(t)
		if d1.RootKey() == d2.RootKey() {
			t.Fatalf("two roots share the key %s", d1.RootKey())
		}
		want := "file://" + filepath.ToSlash(d1.Path) + "/"
		if d1.Backend == config.BackendS3 {
			want = "s3://" + d1.Bucket + "/" + s3Prefix
		}
		if d1.RootKey() != want {
			t.Fatalf("RootKey = %s, want %s", d1.RootKey(), want)
		}
		if got := strings.TrimSuffix(r1.String(), "/") + "/"; got != strings.TrimPrefix(want, "file://") && got != want {
			t.Fatalf("backend %s does not name the destination's root %s", r1, want)
		}
		mustPut(t, r1, "x.txt", "x")
		if got := contents(t, r2); len(got) != 0 {
			t.Fatalf("fresh root holds %v", got)
		}
	})
}

// newLocalRoot is an empty local root (a folder "root" in a fresh
// temporary folder, so that its parent can hold things outside it).
func newLocalRoot(t *testing.T) (*local.Backend, config.Destination) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b, config.Destination{Backend: config.BackendLocal, Path: dir}
}
