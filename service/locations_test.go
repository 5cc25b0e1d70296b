package service_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// A bundle outside its pipeline's bundle_locations is refused before the
// bundle store is opened and before any root is: even a root that holds a
// catalog (where an unusable bundle still costs a lease's lock object)
// stays byte for byte as it was. OpenBundle refuses it too; a bundle
// inside publishes.
func TestPublishRefusesBundleOutsideItsLocations(t *testing.T) {
	h, d, root := openingHarness(t)
	h.MustPublish(t1, pipeA, d.ID, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	allowed := t.TempDir()
	h.Config.Pipelines[0].BundleLocations = []string{allowed}
	var opened atomic.Int32
	h.Stores.SetWrapBundle(func(b storage.Backend) storage.Backend { opened.Add(1); return b })

	outside, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a2\n"})
	before := everything(t, root)
	req := service.Request{PipelineID: pipeA, Bundle: outside, BundleEventID: "ev-outside"}
	b, done := h.Service.Publish(context.Background(), req, []config.Destination{d})
	if b != nil || len(done) != 1 || !errors.Is(done[0].Err, config.ErrBundleNotAllowed) || done[0].Result.Root != d.RootKey() {
		t.Fatalf("Publish: bundle %v, done %+v; want no bundle and %v", b, done, config.ErrBundleNotAllowed)
	}
	if o := service.Classify(done[0].Err); o.Reason != "bundle_not_allowed" || o.Retry || o.ExitCode != service.ExitUsage {
		t.Errorf("outcome %+v, want failed/bundle_not_allowed, final, exit 2", o)
	}
	if _, err := h.Service.OpenBundle(context.Background(), req); !errors.Is(err, config.ErrBundleNotAllowed) {
		t.Errorf("OpenBundle: %v, want %v", err, config.ErrBundleNotAllowed)
	}
	if d := diff(before, everything(t, root)); d != "" {
		t.Errorf("the root changed:\n%s", d)
	}
	if n := opened.Load(); n != 0 {
		t.Errorf("the bundle store was opened %d time(s)", n)
	}

	inside := filepath.Join(allowed, "b1")
	if err := os.Rename(outside, inside); err != nil {
		t.Fatal(err)
	}
	h.Clock.Set(t2)
	res, err := h.Publish(t2, pipeA, d.ID, inside)
	if err != nil || len(res.Written) != 1 {
		t.Fatalf("inside bundle_locations: written %d, err %v; want 1 written", len(res.Written), err)
	}
	if got := mustRead(t, mustRoot(t, h, d), "a.txt"); got != "a2\n" {
		t.Errorf("a.txt = %q after the allowed bundle", got)
	}
}

// hiddenFolder is a bundle store that does not say which folder it holds
// (Properties.HeldFolder nil).
type hiddenFolder struct{ storage.Backend }

func (h hiddenFolder) Properties() storage.Properties {
	p := h.Backend.Properties()
	p.HeldFolder = nil
	return p
}

// A local bundle under bundle_locations whose store cannot tell the folder
// it opened is refused, not trusted: the check on the opened folder fails
// closed.
func TestOpenBundleRefusesAFolderItCannotCheck(t *testing.T) {
	h, _, _ := openingHarness(t)
	allowed := t.TempDir()
	h.Config.Pipelines[0].BundleLocations = []string{allowed}
	h.Stores.SetWrapBundle(func(b storage.Backend) storage.Backend { return hiddenFolder{b} })
	inside, _ := makeBundle(t, "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	if err := os.Rename(inside, filepath.Join(allowed, "b1")); err != nil {
		t.Fatal(err)
	}
	req := service.Request{PipelineID: pipeA, Bundle: filepath.Join(allowed, "b1"), BundleEventID: "ev-hidden"}
	_, err := h.Service.OpenBundle(context.Background(), req)
	want := "bundle location not allowed: bundle " + req.Bundle + ` of pipeline "` + pipeA + `": the store opened for it does not say which folder it holds, so it cannot be checked against bundle_locations`
	if !errors.Is(err, config.ErrBundleNotAllowed) || err.Error() != want {
		t.Fatalf("OpenBundle: %v\nwant %s", err, want)
	}
}
