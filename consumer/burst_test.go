package consumer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
)

// burstYAML: pipeline burst publishes into root live by replacement;
// pipeline first, another owner in the same root, holds the root while a
// burst is delivered.
const burstYAML = `
pipelines:
  - {id: first, destinations: [live]}
  - {id: burst, destinations: [live]}
destinations:
  - {id: live, backend: local, path: "@live@", workflow: replacement}
`

// holdRootUntil makes the first publication into a root wait, after it
// took the root's turn, until cond holds (or 20 s pass).
func holdRootUntil(cond func() bool) func(config.Destination, storage.Backend) storage.Backend {
	var started atomic.Bool
	return func(_ config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, read: func(ctx context.Context, _ string) error {
			if !started.CompareAndSwap(false, true) {
				return nil
			}
			for deadline := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(deadline); {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil
		}}
	}
}

// countType counts the results of type typ among ids'.
func (e *env) countType(ids []string, typ string) int {
	n := 0
	for _, id := range ids {
		for _, r := range e.results.of(id) {
			if r.Type == typ {
				n++
			}
		}
	}
	return n
}

// ownerSource is the source version of owner's records in the root.
func ownerSource(t *testing.T, root storage.Backend, owner catalog.Owner) catalog.Source {
	t.Helper()
	var src catalog.Source
	for _, o := range readCatalog(t, root).Outputs {
		if o.PipelineID == owner.PipelineID && o.DestinationID == owner.DestinationID {
			if src.ID != "" && src != o.Source {
				t.Fatalf("%s holds two versions: %+v and %+v", owner, src, o.Source)
			}
			src = o.Source
		}
	}
	return src
}

// TestABurstPublishesOnlyTheNewest: v1…v8 of one source are announced
// for a replacement root while another owner's publication holds it. v8
// is published; v1…v7 are superseded at once, while the root is still
// held, each naming v8, and their bundles' files are never read (they
// are gone after their manifests were written: a read would fail with
// bundle_missing).
func TestABurstPublishesOnlyTheNewest(t *testing.T) {
	e := newEnv(t, burstYAML, false)
	var burst []string
	opts := fastOptions()
	opts.Workers = 12
	e.start(nodeConfig{opts: opts, wrap: holdRootUntil(func() bool { return e.countType(burst, events.TypeSuperseded) >= 7 })})

	firstLoc, firstDigest := e.bundle("src.first", map[string]string{"first.md": "# first\n"})
	first := e.announce(events.BundleReady{PipelineID: "first", Bundle: firstLoc, ManifestDigest: firstDigest})
	var newest string
	for v := 1; v <= 8; v++ {
		loc, digest := e.bundle("src.burst", map[string]string{"report.md": fmt.Sprintf("# v%d\n", v)})
		if v < 8 {
			if err := os.Remove(filepath.Join(loc, "report.md")); err != nil {
				t.Fatal(err)
			}
		}
		burst = append(burst, e.announce(events.BundleReady{PipelineID: "burst", Bundle: loc, ManifestDigest: digest}))
		newest = digest
	}
	e.quiet(30 * time.Second)

	if r := e.results.of(first); len(r) != 1 || r[0].Type != events.TypePublished {
		t.Fatalf("the other owner's event: %+v, want one published", r)
	}
	for v, id := range burst {
		rs := e.results.of(id)
		if len(rs) != 1 {
			t.Fatalf("v%d: %d results %+v, want one", v+1, len(rs), rs)
		}
		r := rs[0]
		if v == 7 {
			if r.Type != events.TypePublished || r.Written != 1 {
				t.Fatalf("v8: %s %s written %d (%s), want published, 1 written", r.Type, r.Reason, r.Written, r.Message)
			}
			continue
		}
		if r.Type != events.TypeSuperseded || r.SupersededBy == nil || r.SupersededBy.Digest != newest || r.Source == nil || r.Source.ID != "src.burst" {
			t.Fatalf("v%d: %s %s by %+v (%s), want superseded by v8 (%s)", v+1, r.Type, r.Reason, r.SupersededBy, r.Message, newest)
		}
	}
	root := localRoot(t, e.roots["live"])
	if got := ownerSource(t, root, catalog.Owner{PipelineID: "burst", DestinationID: "live"}); got.Digest != newest {
		t.Fatalf("the root holds %+v, want v8 (%s)", got, newest)
	}
	e.checkNoBadEvents()
}
