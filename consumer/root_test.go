package consumer_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// tree is every file under dir (reserved ones included) with its bytes and
// modification time: two equal trees mean nothing was written in between.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.ModTime().String() + " " + string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServeFollowsTheConfiguredRoot: while serve runs, the destination's
// folder is moved away and replaced, then deleted, then recreated. Every
// publication goes to what the configured path names at that moment, a gone
// root is reported once as failed/root_missing, and the moved folder is
// never written again. No restart.
func TestServeFollowsTheConfiguredRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
pipelines:
  - id: weather.daily
    destinations: [site]
destinations:
  - id: site
    backend: local
    path: @site@
`, false)
	e.start(nodeConfig{opts: fastOptions()})
	root := e.roots["site"]
	announce := func(files map[string]string) string {
		loc, digest := e.bundle("weather.tomorrow", files)
		return e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	}
	// published checks the event and that root's files and catalog are
	// exactly files.
	published := func(id string, files map[string]string) {
		t.Helper()
		res := e.wait(id, 1, 20*time.Second)
		if len(res) != 1 {
			t.Fatalf("%s: %d results, want 1", id, len(res))
		}
		checkPublished(t, res[0], id, "site", len(files), 0, 0, nil)
		b := localRoot(t, root)
		want := map[string]string{catalog.FileName: ""}
		for p, c := range files {
			want[p] = digestOf(c)
		}
		checkFiles(t, b, want)
		cat := readCatalog(t, b)
		if len(cat.Outputs) != len(files) {
			t.Fatalf("%s: catalog of %s records %d outputs, want %d", id, root, len(cat.Outputs), len(files))
		}
		for _, o := range cat.Outputs {
			if o.SHA256 != digestOf(files[o.Path]) {
				t.Fatalf("%s: catalog record %s has %s, want %s", id, o.Path, o.SHA256, digestOf(files[o.Path]))
			}
		}
	}

	id1 := announce(v1)
	published(id1, v1)

	// mv root root.old && mkdir root
	must(t, os.Rename(root, root+".old"))
	must(t, os.Mkdir(root, 0o755))
	old := tree(t, root+".old")

	id2 := announce(v2)
	published(id2, v2)

	// rm -rf root: reported once, not retried, with the fix in the message.
	must(t, os.RemoveAll(root))
	id3 := announce(v1)
	res := e.wait(id3, 1, 20*time.Second)
	want := "destination root " + root + " does not exist (moved or deleted?): recreate the folder or fix the destination's path"
	if len(res) != 1 || res[0].Type != events.TypeFailed || res[0].Reason != events.ReasonRootMissing ||
		res[0].DestinationID != "site" || res[0].Attempts != 1 || res[0].Message != want {
		e.dump()
		t.Fatalf("event 3 on a deleted root: %+v, want one failed/%s after 1 attempt: %q", res, events.ReasonRootMissing, want)
	}
	e.settled(10 * time.Second)
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the deleted root was recreated by distributor: %v", err)
	}

	// mkdir root: the next event publishes without a restart.
	must(t, os.Mkdir(root, 0o755))
	id4 := announce(v1)
	published(id4, v1)

	if got := tree(t, root+".old"); !reflect.DeepEqual(got, old) {
		t.Fatalf("root.old changed after it was moved away:\nnow  %v\nthen %v", got, old)
	}
	e.checkNoBadEvents()
}

// swapOnce moves the root away and replaces it right after the first output
// of a publication lands, once for the whole test.
type swapOnce struct {
	storage.Backend
	once *sync.Once
	swap func()
}

func (s *swapOnce) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := s.Backend.Put(ctx, p, r, size, o)
	if err != nil {
		return oi, err
	}
	if !catalog.IsReserved(p) {
		s.once.Do(s.swap)
	}
	return oi, nil
}

// Stage swaps right after the first staged output is named.
func (s *swapOnce) Stage(ctx context.Context) storage.Stage {
	return testenv.HookedStage{Stage: s.Backend.Stage(ctx), Hook: func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		oi, err := commit()
		if err == nil && !catalog.IsReserved(p) {
			s.once.Do(s.swap)
		}
		return oi, err
	}}
}

// TestServeRetriesAPublicationWhoseRootWasSwappedMidway: the swap lands
// between the writes and the catalog commit. That attempt commits nothing
// into the moved folder; the event is retried and published into the new
// one.
func TestServeRetriesAPublicationWhoseRootWasSwappedMidway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
pipelines:
  - id: weather.daily
    destinations: [site]
destinations:
  - id: site
    backend: local
    path: @site@
`, false)
	root := e.roots["site"]
	var once sync.Once
	e.start(nodeConfig{opts: fastOptions(), wrap: func(_ config.Destination, b storage.Backend) storage.Backend {
		return &swapOnce{Backend: b, once: &once, swap: func() {
			must(t, os.Rename(root, root+".old"))
			must(t, os.Mkdir(root, 0o755))
		}}
	}})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 1, 20*time.Second)
	if len(res) != 1 || res[0].Type != events.TypePublished || res[0].Attempts != 2 || res[0].Written != len(v1) {
		e.dump()
		t.Fatalf("results %+v, want one published after 2 attempts with %d written", res, len(v1))
	}
	want := map[string]string{catalog.FileName: ""}
	for p, c := range v1 {
		want[p] = digestOf(c)
	}
	checkFiles(t, localRoot(t, root), want)
	if _, err := os.Stat(filepath.Join(root+".old", catalog.FileName)); !os.IsNotExist(err) {
		t.Fatalf("a catalog was committed into the moved folder: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
