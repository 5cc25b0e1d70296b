package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// orderRoot records, in order, the moments its outputs become visible
// (a staged commit or a Put), its flushes and its deletes.
type orderRoot struct {
	storage.Backend
	mu     sync.Mutex
	events []string
}

func (o *orderRoot) add(ev string) {
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
}

func (o *orderRoot) Stage(ctx context.Context) storage.Stage {
	return hookedStage(o.Backend.Stage(ctx), func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		oi, err := commit()
		if err == nil {
			o.add("visible " + p)
		}
		return oi, err
	})
}

func (o *orderRoot) Put(ctx context.Context, p string, r io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := o.Backend.Put(ctx, p, r, size, opts)
	if err == nil && !catalog.IsReserved(p) {
		o.add("visible " + p)
	}
	return oi, err
}

func (o *orderRoot) Sync(ctx context.Context) error {
	err := o.Backend.Sync(ctx)
	o.add("sync")
	return err
}

func (o *orderRoot) Delete(ctx context.Context, paths ...string) error {
	err := o.Backend.Delete(ctx, paths...)
	for _, p := range paths {
		if !catalog.IsReserved(p) {
			o.add("delete " + p)
		}
	}
	return err
}

// generated is a publication of files (path: content) as generated outputs,
// version n of one source, created at created.
func generated(files map[string]string, n int, created time.Time, wf planner.Workflow) engine.Publication {
	pub := engine.Publication{Owner: catalog.Owner{PipelineID: "site.build", DestinationID: "www"}, Workflow: wf,
		Source:        catalog.Source{ID: "site", Digest: digestOfString(fmt.Sprint("version ", n)), Created: created},
		BundleEventID: fmt.Sprint("ev-", n)}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		data := []byte(files[p])
		pub.Outputs = append(pub.Outputs, engine.Output{Content: data, Desired: planner.Desired{Path: p, From: p, Kind: catalog.KindGenerated,
			Transform: "site", SHA256: digestOf(data), Size: int64(len(data))}})
	}
	return pub
}

func digestOfString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestPublishLastGroupsBecomeVisibleInOrder: with publish_last, the outputs
// matching no glob become visible first, then each group in the order
// listed, each only after a flush that follows every output of the groups
// before it; the deletes of dropped paths come after every write is
// visible and flushed. Local and S3 alike.
func TestPublishLastGroupsBecomeVisibleInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		b, _ := newRoot(t)
		root := &orderRoot{Backend: b}
		ctx := context.Background()
		e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test", Workers: 8}
		globs := []string{"**/*.css", "**/*.html", "index.json"}
		site := func(v int) map[string]string {
			files := map[string]string{"index.json": fmt.Sprint(`{"v":`, v, `}`), "index.html": fmt.Sprint("<p>", v), "docs/a.html": fmt.Sprint("a", v),
				"css/site.css": fmt.Sprint("body{}", v), fmt.Sprintf("assets/app.%d.js", v): "js", "data/x.csv": fmt.Sprint(v)}
			for i := range 20 {
				files[fmt.Sprintf("assets/img%02d.%d.png", i, v)] = fmt.Sprint(i)
			}
			return files
		}
		for v := 1; v <= 2; v++ {
			pub := generated(site(v), v, fixedNow.Add(time.Duration(v)*time.Minute-time.Hour), planner.Replacement)
			pub.PublishLast = globs
			root.events = nil
			if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
				t.Fatal(err)
			}
			checkVisibleOrder(t, root.events, globs)
			if v == 2 && !slices.Contains(root.events, "delete assets/app.1.js") {
				t.Fatalf("the replacement deleted no dropped path: %q", root.events)
			}
		}
	})
}

// checkVisibleOrder checks events (orderRoot) against the groups of globs.
func checkVisibleOrder(t *testing.T, events []string, globs []string) {
	t.Helper()
	group, synced, deleting := 0, true, false
	seen := make([]int, len(globs)+1)
	for _, ev := range events {
		switch {
		case ev == "sync":
			synced = true
		case strings.HasPrefix(ev, "visible "):
			g := engine.GroupOf(strings.TrimPrefix(ev, "visible "), globs)
			if deleting {
				t.Fatalf("%s after a delete: %q", ev, events)
			}
			if g < group || g > group && !synced {
				t.Fatalf("%s (group %d) while group %d is being written (flushed since: %v): %q", ev, g, group, synced, events)
			}
			if g > group {
				group, synced = g, false
			}
			seen[g]++
		case strings.HasPrefix(ev, "delete "):
			if !synced {
				t.Fatalf("%s before the last group was flushed: %q", ev, events)
			}
			deleting = true
		}
	}
	for g, n := range seen {
		if n == 0 {
			t.Fatalf("group %d had no output: %q", g, events)
		}
	}
}
