// Package enginetest is the harness of the engine's and the service's
// tests: destination roots on a local folder and on the in-process S3
// server, a service over them with a settable clock, bundles and
// assertions about what a root holds.
package enginetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// S3Prefix is the key prefix of every S3 test root inside its bucket.
const S3Prefix = "site/"

// BackendEnv makes fresh destination roots on one kind of backend.
type BackendEnv struct {
	// NewRoot returns a fresh, empty root and a destination whose Backend,
	// Path and Bucket name it (so RootKey identifies it).
	NewRoot func(t *testing.T) (storage.Backend, config.Destination)

	// Outside returns a backend on the storage that holds d's root but
	// outside it: the parent folder, or the bucket without the prefix.
	Outside func(t *testing.T, d config.Destination) storage.Backend
}

// ForEachBackend runs fn as one subtest per backend kind.
func ForEachBackend(t *testing.T, fn func(t *testing.T, newRoot func(t *testing.T) (storage.Backend, config.Destination))) {
	t.Helper()
	ForEachBackendEnv(t, func(t *testing.T, env BackendEnv) { fn(t, env.NewRoot) })
}

// ForEachBackendEnv is ForEachBackend with access to the storage around a root.
func ForEachBackendEnv(t *testing.T, fn func(t *testing.T, env BackendEnv)) {
	t.Helper()
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		fn(t, BackendEnv{
			NewRoot: func(t *testing.T) (storage.Backend, config.Destination) {
				return NewLocalRoot(t)
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
		fn(t, BackendEnv{
			NewRoot: func(t *testing.T) (storage.Backend, config.Destination) {
				bucket := srv.Bucket(t)
				return srv.Backend(t, bucket, S3Prefix), config.Destination{
					Backend: config.BackendS3, Bucket: bucket, Path: S3Prefix,
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

// Stores is the service.Stores of the tests: destination roots registered
// by RootKey, bundle folders opened on the local disk, optionally wrapped.
type Stores struct {
	mu    sync.Mutex
	roots map[string]storage.Backend

	// wrapBundle, when set, wraps every bundle store it opens.
	wrapBundle func(storage.Backend) storage.Backend
}

func (s *Stores) Add(d config.Destination, b storage.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roots == nil {
		s.roots = map[string]storage.Backend{}
	}
	s.roots[d.RootKey()] = b
}

func (s *Stores) SetWrapBundle(wrap func(storage.Backend) storage.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrapBundle = wrap
}

func (s *Stores) Destination(_ context.Context, d config.Destination) (storage.Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.roots[d.RootKey()]
	if !ok {
		return nil, fmt.Errorf("test stores: no root registered for destination %q (%s)", d.ID, d.RootKey())
	}
	return b, nil
}

func (s *Stores) Bundle(_ context.Context, location string) (storage.Backend, error) {
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

// Clock is a settable Engine.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Times used throughout: bundles are created at T0, publications run later.
var (
	T0 = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	T1 = time.Date(2026, 6, 19, 12, 5, 0, 0, time.UTC)
	T2 = time.Date(2026, 6, 19, 12, 10, 0, 0, time.UTC)
)

// Pipelines and destinations of the Harness.
const (
	PipeA = "weatherreporter.daily"
	PipeB = "tides.hourly"
)

// Harness is a Runner over test stores with a controlled Clock.
type Harness struct {
	T       *testing.T
	Clock   *Clock
	Stores  *Stores
	Config  *config.Config
	Service *service.Service
}

// NewHarness returns a harness with no destinations, its clock at T1.
func NewHarness(t *testing.T) *Harness {
	h := &Harness{T: t, Clock: &Clock{t: T1}, Stores: &Stores{}, Config: &config.Config{}}
	h.Service = &service.Service{
		Engine: &engine.Engine{Now: h.Clock.Now, Version: "test", Workers: 4},
		Config: h.Config,
		Stores: h.Stores,
		Locker: lease.NewStorageLocker("engine-test", time.Minute),
	}
	return h
}

// addDest registers destination d (whose Backend/Path/Bucket come from
// newRoot) on root, published to by the pipelines Named.
func (h *Harness) AddDest(d config.Destination, root storage.Backend, pipelines ...string) config.Destination {
	h.T.Helper()
	if d.ID == "" {
		h.T.Fatal("destination needs an id")
	}
	if d.Workflow == "" {
		d.Workflow = "additive"
	}
	if !d.Publish.Sources && !d.Publish.HTML {
		d.Publish.Sources = true
	}
	h.Config.Destinations = append(h.Config.Destinations, d)
	for _, id := range pipelines {
		found := false
		for i := range h.Config.Pipelines {
			if h.Config.Pipelines[i].ID == id {
				h.Config.Pipelines[i].Destinations = append(h.Config.Pipelines[i].Destinations, d.ID)
				found = true
			}
		}
		if !found {
			h.Config.Pipelines = append(h.Config.Pipelines, config.Pipeline{ID: id, Destinations: []string{d.ID}})
		}
	}
	h.Stores.Add(d, root)
	return d
}

// MakeBundle writes files into a fresh folder with a manifest for source id
// (created at T0) and returns the folder and the manifest's digest.
func MakeBundle(t *testing.T, id string, files map[string]string) (string, string) {
	t.Helper()
	return MakeBundleAt(t, id, T0, files)
}

// MakeBundleAt is MakeBundle with the manifest created at created.
func MakeBundleAt(t *testing.T, id string, created time.Time, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	return dir, testenv.WriteBundle(t, dir, id, created, files)
}

// publish runs Runner.Publish of the bundle in dir for pipeline to dest at
// time now, as the consumer or `apply` would.
func (h *Harness) Publish(now time.Time, pipeline, dest, dir string, mod ...func(*service.Request)) (engine.Result, error) {
	ctx := context.Background()
	h.Clock.Set(now)
	req := service.Request{PipelineID: pipeline, Bundle: dir, Destinations: []string{dest}, BundleEventID: "ev-" + filepath.Base(dir)}
	for _, m := range mod {
		m(&req)
	}
	b, err := h.Service.OpenBundle(ctx, req)
	if err != nil {
		return engine.Result{}, err
	}

	// No t.Fatal here: concurrency tests call publish from goroutines.
	ds, err := h.Service.Destinations(req)
	if err != nil {
		return engine.Result{}, err
	}
	if len(ds) != 1 {
		return engine.Result{}, fmt.Errorf("request resolves to %d destinations, want 1", len(ds))
	}
	return h.Service.PublishTo(ctx, req, b, ds[0])
}

// mustPublish publishes a new bundle of files and fails the test on error.
func (h *Harness) MustPublish(now time.Time, pipeline, dest, sourceID string, files map[string]string) engine.Result {
	h.T.Helper()

	// Made an hour before it is published: later publications are newer
	// versions, and all of them are older than MakeBundle's (created T0)
	// for publications up to T0 + 1h.
	dir, _ := MakeBundleAt(h.T, sourceID, now.Add(-time.Hour), files)
	res, err := h.Publish(now, pipeline, dest, dir)
	if err != nil {
		h.T.Fatalf("publish %s to %s: %v", sourceID, dest, err)
	}
	return res
}

func DigestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return catalog.Digest(sum[:])
}

// ReadCatalog reads and parses the root's catalog; nil when absent.
func ReadCatalog(t *testing.T, root storage.Backend) (*catalog.Catalog, storage.Version) {
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

// CatalogVersion is the catalog's current version ("" when absent).
func CatalogVersion(t *testing.T, root storage.Backend) storage.Version {
	t.Helper()
	_, v, err := root.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Contents returns every object in the root outside the reserved space
// (.distributor.json and .distributor/) with its bytes.
func Contents(t *testing.T, root storage.Backend) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := root.List(ctx, "", func(o storage.ObjectInfo) error {
		if catalog.IsReserved(o.Path) {
			return nil
		}
		data, err := ReadObject(ctx, root, o.Path)
		out[o.Path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ReadObject(ctx context.Context, root storage.Backend, p string) ([]byte, error) {
	rc, err := root.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func MustRead(t *testing.T, root storage.Backend, p string) string {
	t.Helper()
	data, err := ReadObject(context.Background(), root, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func MustPut(t *testing.T, root storage.Backend, p, content string) {
	t.Helper()
	if _, err := root.Put(context.Background(), p, strings.NewReader(content), int64(len(content)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// AssertDescribesStorage checks that the catalog and the root agree
// exactly: every record's object exists with the recorded size and digest,
// every non-reserved object has a record, and no intent is left.
func AssertDescribesStorage(t *testing.T, root storage.Backend) *catalog.Catalog {
	t.Helper()
	cat, _ := ReadCatalog(t, root)
	if cat == nil {
		cat = &catalog.Catalog{}
	}
	stored := Contents(t, root)
	index := cat.Index()
	for p, rec := range index {
		data, ok := stored[p]
		switch {
		case !ok:
			t.Errorf("record %s has no object", p)
		case int64(len(data)) != rec.Size || DigestOf([]byte(data)) != rec.SHA256:
			t.Errorf("record %s says %s/%d, the object is %s/%d", p, rec.SHA256, rec.Size, DigestOf([]byte(data)), len(data))
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

// RecordPaths returns the record paths of cat, in catalog (path) order.
func RecordPaths(cat *catalog.Catalog) []string {
	out := []string{}
	if cat == nil {
		return out
	}
	for _, o := range cat.Outputs {
		out = append(out, o.Path)
	}
	return out
}

func EqualStrings(a, b []string) bool {
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

func EqualMaps(a, b map[string]string) bool {
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

// FlipByte overwrites the object at p with the same bytes but one flipped,
// directly through the backend (behind distributor's back).
func FlipByte(t *testing.T, root storage.Backend, p string) {
	t.Helper()
	data := []byte(MustRead(t, root, p))
	if len(data) == 0 {
		t.Fatalf("%s is empty", p)
	}
	data[len(data)/2] ^= 0x01
	if _, err := root.Put(context.Background(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func NewLocalRoot(t *testing.T) (*local.Backend, config.Destination) {
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

// Snapshot is every file under root except distributor's scratch space,
// with the catalog parsed (so that its comparison ignores nothing but is
// readable in failures).
func Snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".distributor" {
				return fs.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff lists how the snapshot a (after a crash and a retry) differs from b
// (an uninterrupted run); "" when they are equal.
func Diff(a, b map[string]string) string {
	var keys []string
	seen := map[string]bool{}
	for k := range a {
		keys, seen[k] = append(keys, k), true
	}
	for k := range b {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		av, aok := a[k]
		bv, bok := b[k]
		switch {
		case !aok:
			fmt.Fprintf(&sb, "  only in uninterrupted run: %s\n", k)
		case !bok:
			fmt.Fprintf(&sb, "  only after crash+retry: %s\n", k)
		case av != bv:
			fmt.Fprintf(&sb, "  differs: %s\n    crash+retry: %q\n    uninterrupted: %q\n", k, av, bv)
		}
	}
	return sb.String()
}

// IntentPending reports whether root holds an intent: a local root keeps
// its intent file and empties it when a publication is done.
func IntentPending(t *testing.T, root string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return len(data) > 0
}

type NewRootFunc = func(t *testing.T) (storage.Backend, config.Destination)

// Named returns base (a fresh root's destination) with an id and workflow.
func Named(base config.Destination, id string, wf planner.Workflow) config.Destination {
	base.ID, base.Workflow = id, wf
	return base
}

func MustRecord(t *testing.T, cat *catalog.Catalog, p string) catalog.Output {
	t.Helper()
	if cat == nil {
		t.Fatalf("no catalog, want a record for %s", p)
	}
	o, ok := cat.Lookup(p)
	if !ok {
		t.Fatalf("no record for %s; records: %v", p, RecordPaths(cat))
	}
	return o
}

func WantContents(t *testing.T, root storage.Backend, want map[string]string) {
	t.Helper()
	if got := Contents(t, root); !EqualMaps(got, want) {
		t.Fatalf("root holds %q,\nwant %q", got, want)
	}
}

func WantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if got == nil {
		got = []string{}
	}
	if want == nil {
		want = []string{}
	}
	if !EqualStrings(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// WantNoRecordOf fails when any catalog record in root names the version
// whose manifest digest is digest.
func WantNoRecordOf(t *testing.T, root storage.Backend, digest, when string) {
	t.Helper()
	cat, _ := ReadCatalog(t, root)
	var named []string
	for _, o := range cat.Outputs {
		if o.Source.Digest == digest {
			named = append(named, o.Path)
		}
	}
	if len(named) > 0 {
		t.Fatalf("%s: records of the older version %s: %v", when, digest, named)
	}
}
