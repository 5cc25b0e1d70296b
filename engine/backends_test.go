package engine_test

// The backend matrix: every test in rules_test.go and maintenance_test.go
// runs once on a local folder and once on a prefix of a bucket on the
// in-process S3 server, through service.Service with the direct-mode lock
// object in the root (lease.StorageLocker), so the S3 conditional writes
// are exercised by the lock as well as by the catalog.

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

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

// Open counts a versioned open as a ReadVersion: a versioned read.
func (c *countingBackend) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if storage.HasOption(opts, storage.Versioned) {
		c.record("ReadVersion", p)
	} else {
		c.record("Open", p)
	}
	return c.Backend.Open(ctx, p, opts...)
}

func (c *countingBackend) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	c.record("List", prefix)
	return c.Backend.List(ctx, prefix, fn)
}

func (c *countingBackend) hookReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	c.record("ReadVersion", p)
	return c.Backend.ReadVersion(ctx, p, opts...)
}

func (c *countingBackend) hookPut(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
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

func (s *countingStage) Put(ctx context.Context, p string, r storage.Source, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
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

func (c *countingBackend) hookReadIntent(ctx context.Context) ([]byte, storage.Version, error) {
	c.record("ReadIntent", "")
	return c.Backend.ReadVersion(ctx, engine.IntentPath, storage.InPlace)
}

func (c *countingBackend) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	c.record("WriteIntent", "")
	return c.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
}

func (c *countingBackend) hookClearIntent(ctx context.Context, want storage.Version) error {
	c.record("ClearIntent", "")
	return c.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

// PrepareCatalog counts the commit of the catalog as "CommitCatalog".
func (c *countingBackend) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
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

func (c *countingBackend) hookOverwrite(ctx context.Context, p string, data []byte) error {
	c.record("Overwrite", p)
	return putInPlace(ctx, c.Backend, p, data)
}

func (c *countingBackend) Delete(ctx context.Context, paths ...string) error {
	c.record("Delete", paths...)
	return c.Backend.Delete(ctx, paths...)
}

func (c *countingBackend) hookWriteIfVersion(ctx context.Context, p string, d []byte, v storage.Version, opts ...storage.Option) (storage.Version, error) {
	c.record("WriteIfVersion", p)
	return c.Backend.WriteIfVersion(ctx, p, d, v, opts...)
}

func (c *countingBackend) hookDeleteIfVersion(ctx context.Context, p string, v storage.Version, opts ...storage.Option) error {
	c.record("DeleteIfVersion", p)
	return c.Backend.DeleteIfVersion(ctx, p, v, opts...)
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

// Dispatch of the contract's calls to the hooks above.

func (c *countingBackend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return c.hookWriteIntent(ctx, data)
	}
	return c.hookWriteIfVersion(ctx, p, data, want, opts...)
}

func (c *countingBackend) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return c.hookClearIntent(ctx, want)
	}
	return c.hookDeleteIfVersion(ctx, p, want, opts...)
}

func (c *countingBackend) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return c.hookReadIntent(ctx)
	}
	return c.hookReadVersion(ctx, p, opts...)
}

// Put takes the in-place writes to hookOverwrite.
func (c *countingBackend) Put(ctx context.Context, p string, body io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if opts.InPlace {
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.ObjectInfo{}, err
		}
		return storage.ObjectInfo{Path: p, Size: int64(len(data))}, c.hookOverwrite(ctx, p, data)
	}
	return c.hookPut(ctx, p, body, size, opts)
}

// putInPlace is a write the backend may make in place, as the engine
// writes fingerprint shards.
func putInPlace(ctx context.Context, b storage.Backend, p string, data []byte) error {
	_, err := b.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{ContentType: "text/plain", DeferSync: true, InPlace: true})
	return err
}
