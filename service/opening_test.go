package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// everything is every file below root, .distributor/ included, with its
// bytes: a run that changes nothing leaves it equal.
func everything(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openingHarness is a harness with one local destination of pipeA.
func openingHarness(t *testing.T) (*harness, config.Destination, string) {
	t.Helper()
	h := newHarness(t)
	root, d := newLocalRoot(t)
	d.ID, d.Workflow = "latest", "replacement"
	return h, h.AddDest(d, root, pipeA), d.Path
}

// publishWhileOpening runs Service.Publish of the bundle in dir to d, which
// opens the bundle while it takes the root's lease.
func (h *harness) publishWhileOpening(ctx context.Context, d config.Destination, dir string) (engine.Result, *bundle.Bundle, error) {
	req := service.Request{PipelineID: pipeA, Bundle: dir, Destinations: []string{d.ID}, BundleEventID: "ev-" + filepath.Base(dir)}
	b, done := h.Service.Publish(ctx, req, []config.Destination{d})
	return done[0].Result, b, done[0].Err
}

// brokenBundle is a bundle folder whose manifest is not JSON, and the error
// opening it gives.
func (h *harness) brokenBundle() (string, error) {
	dir := h.T.TempDir()
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), []byte("{not json"), 0o644); err != nil {
		h.T.Fatal(err)
	}
	_, err := h.Service.OpenBundle(context.Background(), service.Request{Bundle: dir})
	if err == nil {
		h.T.Fatal("the broken bundle opens")
	}
	return dir, err
}

// A publication whose manifest is read while the lease is taken ends
// exactly like one whose bundle was opened first.
func TestBundleOpenedDuringTheLeaseEndsLikePublish(t *testing.T) {
	files := map[string]string{"a.txt": "a\n", "data/b.csv": "b\n"}
	dir, _ := makeBundle(t, "weatherreporter.today", files)
	var results [2]engine.Result
	var roots [2]map[string]string
	for i := range 2 {
		h, d, root := openingHarness(t)
		h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "old\n", "gone.txt": "x\n"})
		h.Clock.Set(t2)
		var err error
		if i == 0 {
			results[i], err = h.Publish(t2, pipeA, d.ID, dir)
		} else {
			var b *bundle.Bundle
			results[i], b, err = h.publishWhileOpening(context.Background(), d, dir)
			if b == nil {
				t.Error("Publish returned no bundle")
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		// The next catalog is compared as the file it became (roots).
		results[i].Root, results[i].LeaseToken, results[i].Plan.Next = "", "", nil
		roots[i] = snapshot(t, root)
	}
	if !reflect.DeepEqual(results[0], results[1]) {
		t.Errorf("results differ:\nPublish        %+v\nopened during the lease %+v", results[0], results[1])
	}
	if d := diff(roots[0], roots[1]); d != "" {
		t.Errorf("roots differ:\n%s", d)
	}
	if len(results[1].Written) != 2 || len(results[1].Deleted) != 1 {
		t.Errorf("written %d, deleted %d; want 2 and 1", len(results[1].Written), len(results[1].Deleted))
	}
}

// A bundle that cannot be opened fails the publication with its own error
// and changes nothing: an interrupted run's intent is not rolled forward
// (which would remove it) before the bundle is known good, and a fresh
// root gets no lease objects.
func TestBundleOpenedDuringTheLeaseUnusableBundleChangesNothing(t *testing.T) {
	for _, managed := range []bool{true, false} {
		h, d, root := openingHarness(t)
		if managed {
			h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), []byte(emptyIntent), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := everything(t, root)
		dir, want := h.brokenBundle()
		_, b, err := h.publishWhileOpening(context.Background(), d, dir)
		if err == nil || err.Error() != want.Error() || b != nil {
			t.Errorf("managed=%t: err %v, bundle %v; want the bundle's error %q and no bundle", managed, err, b, want)
		}
		if d := diff(before, everything(t, root)); d != "" {
			t.Errorf("managed=%t: the root changed:\n%s", managed, d)
		}
		if !managed && len(before) != 0 {
			t.Errorf("the fresh root holds %v", before)
		}
	}
}

// emptyIntent is an interrupted run's intent that changed nothing yet:
// recovering it removes it.
const emptyIntent = `{"version": 1, "writes": [], "deletes": []}`

// With the intent there and a good bundle, the recovery runs first.
func TestBundleOpenedDuringTheLeaseRecoversOnceTheBundleIsGood(t *testing.T) {
	h, d, root := openingHarness(t)
	h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	intent := filepath.Join(root, filepath.FromSlash(engine.IntentPath))
	if err := os.WriteFile(intent, []byte(emptyIntent), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a2\n"})
	res, b, err := h.publishWhileOpening(context.Background(), d, dir)
	if err != nil || b == nil {
		t.Fatalf("err %v, bundle %v", err, b)
	}
	if !res.Recovered || len(res.Written) != 1 {
		t.Errorf("recovered %t, written %d; want true and 1", res.Recovered, len(res.Written))
	}
	if intentPending(t, root) {
		t.Error("an intent is still pending after the recovery")
	}
}

func mustRoot(t *testing.T, h *harness, d config.Destination) storage.Backend {
	t.Helper()
	root, err := h.Stores.Destination(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// A bundle that cannot be opened ends the wait for a held lease at once,
// with the bundle's error.
func TestBundleOpenedDuringTheLeaseUnusableBundleEndsTheLeaseWait(t *testing.T) {
	h, d, _ := openingHarness(t)
	h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	other := lease.NewStorageLocker("other-holder", lease.MaxTTL)
	l, err := other.Acquire(context.Background(), lease.Root{Key: d.RootKey(), Store: mustRoot(t, h, d)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	h.Service.LeaseWait = time.Hour
	dir, want := h.brokenBundle()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err = h.publishWhileOpening(ctx, d, dir)
	if err == nil || err.Error() != want.Error() || errors.Is(err, lease.ErrHeld) {
		t.Errorf("err %v, want the bundle's %q", err, want)
	}
	if ctx.Err() != nil {
		t.Error("the publication waited for the held lease")
	}
}

// gatedBundles opens bundle stores whose reads wait until gate closes: a
// bundle store that hangs.
type gatedBundles struct {
	service.Stores
	gate chan struct{}
}

func (g gatedBundles) Bundle(ctx context.Context, location string) (storage.Backend, error) {
	b, err := g.Stores.Bundle(ctx, location)
	return gatedBackend{Backend: b, gate: g.gate}, err
}

type gatedBackend struct {
	storage.Backend
	gate chan struct{}
}

func (g gatedBackend) Open(ctx context.Context, path string, opts ...storage.Option) (storage.Reader, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return storage.Reader{}, ctx.Err()
	}
	return g.Backend.Open(ctx, path, opts...)
}

// A publication that takes a root's lease while its bundle opens gives the
// lease back once the lease wait passes without the bundle: a hung bundle
// store does not keep the root from other holders. Once the bundle opens,
// the publication takes the lease again and publishes.
func TestBundleOpenedDuringTheLeaseGivesTheLeaseBackWhileTheBundleHangs(t *testing.T) {
	h, d, _ := openingHarness(t)
	h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"}) // the root has a catalog
	dir, _ := makeBundleAt(t, "weatherreporter.today", t2, map[string]string{"a.txt": "a2\n"})
	gate := make(chan struct{})
	h.Service.Stores = gatedBundles{Stores: h.Service.Stores, gate: gate}
	h.Service.LeaseWait = 200 * time.Millisecond
	logs := captureLog(h.Service)

	type outcome struct {
		res engine.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, _, err := h.publishWhileOpening(context.Background(), d, dir)
		done <- outcome{res, err}
	}()
	// The publication takes the root's lease while its bundle opens ...
	root := lease.Root{Key: d.RootKey(), Store: mustRoot(t, h, d)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := lease.ReadLock(context.Background(), root.Store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if l != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the publication never took the root's lease")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// ... and gives it back: another holder gets the root while the bundle
	// still hangs.
	other := lease.NewStorageLocker("other-holder", lease.MaxTTL)
	deadline = time.Now().Add(10 * time.Second)
	for {
		l, err := other.Acquire(context.Background(), root)
		if err == nil {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("another holder while the bundle hangs: %v, want the root given back after the lease wait", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case o := <-done:
		t.Fatalf("the publication ended before its bundle opened: %+v, %v", o.res, o.err)
	default:
	}
	close(gate)
	o := <-done
	if o.err != nil {
		t.Fatalf("the publication once the bundle opened: %v", o.err)
	}
	if len(o.res.Written) != 1 || o.res.Written[0].Path != "a.txt" {
		t.Errorf("written %+v, want a.txt", o.res.Written)
	}
	wantContents(t, mustRoot(t, h, d), map[string]string{"a.txt": "a2\n"})

	// The lease going back is said once, at warn, naming the root.
	var found []map[string]any
	for _, l := range logLines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "bundle still opening after the lease wait; giving the root's lease back and waiting for the bundle without it" {
			found = append(found, m)
		}
	}
	if len(found) != 1 || found[0]["level"] != "warn" || found[0]["root"] != d.RootKey() || found[0]["destination_id"] != d.ID {
		t.Errorf("warnings of the lease given back while the bundle opens: %v, want one at warn naming root %s and destination %s; log:\n%s",
			found, d.RootKey(), d.ID, logs.String())
	}
}

// catalogReads wraps destination stores so that each read of a root's
// catalog is sent on reads.
type catalogReads struct {
	service.Stores
	reads chan string
}

func (c catalogReads) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	b, err := c.Stores.Destination(ctx, d)
	return catalogReadsBackend{Backend: b, reads: c.reads}, err
}

type catalogReadsBackend struct {
	storage.Backend
	reads chan string
}

func (c catalogReadsBackend) Open(ctx context.Context, path string, opts ...storage.Option) (storage.Reader, error) {
	if path == catalog.FileName && storage.HasOption(opts, storage.Versioned) {
		c.reads <- path
	}
	return c.Backend.Open(ctx, path, opts...)
}

func (c catalogReadsBackend) ReadVersion(ctx context.Context, path string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if path == catalog.FileName {
		c.reads <- path
	}
	return c.Backend.ReadVersion(ctx, path, opts...)
}

// Under the lease the root's catalog is read while the bundle still opens
// (the plan's read leaves the critical path), and only once: the
// publication uses that read.
func TestCatalogIsReadWhileTheBundleOpens(t *testing.T) {
	h, d, _ := openingHarness(t)
	h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	dir, _ := makeBundleAt(t, "weatherreporter.today", t2, map[string]string{"a.txt": "a2\n"})
	gate := make(chan struct{})
	reads := make(chan string, 16)
	h.Service.Stores = catalogReads{Stores: gatedBundles{Stores: h.Service.Stores, gate: gate}, reads: reads}

	type outcome struct {
		res engine.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, _, err := h.publishWhileOpening(context.Background(), d, dir)
		done <- outcome{res, err}
	}()
	select {
	case <-reads:
	case <-time.After(10 * time.Second):
		close(gate)
		<-done
		t.Fatal("the catalog was not read while the bundle opened")
	}
	close(gate)
	o := <-done
	if o.err != nil {
		t.Fatalf("publish: %v", o.err)
	}
	if len(o.res.Written) != 1 || o.res.Written[0].Path != "a.txt" {
		t.Errorf("written %+v, want a.txt", o.res.Written)
	}
	if n := len(reads); n != 0 {
		t.Errorf("the catalog was read %d more times, want once", n)
	}
	wantContents(t, mustRoot(t, h, d), map[string]string{"a.txt": "a2\n"})
}
