package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// benchPublication makes a bundle of n files of size bytes and the
// publication of it to a replacement destination.
func benchPublication(b *testing.B, n, size int) engine.Publication {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	files := make(map[string]string, n)
	data := make([]byte, size)
	for i := range n {
		data[0] = byte(i)
		files[fmt.Sprintf("dir%02d/file%05d.bin", i%20, i)] = string(data)
	}
	testenv.WriteBundle(b, dir, "bench.source", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), files)
	store, err := local.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	bun, err := bundle.Open(ctx, store, dir, "", 0)
	if err != nil {
		b.Fatal(err)
	}
	dest := config.Destination{ID: "site", Backend: "local", Workflow: planner.Replacement,
		Publish: config.Publish{Sources: true, Include: []string{"**"}}}
	outs, err := service.Desire(ctx, dest, "bench.pipeline", bun)
	if err != nil {
		b.Fatal(err)
	}
	return engine.Publication{Owner: catalog.Owner{PipelineID: "bench.pipeline", DestinationID: "site"},
		Workflow: planner.Replacement, Source: catalog.Source{ID: bun.Manifest.ID, Digest: bun.Digest, Created: bun.Manifest.Created},
		Outputs: outs, Bundle: bun}
}

// BenchmarkPublishLocal: a first publication of 2000 × 4 KiB into an empty
// local root, and a republication where nothing changed; without the
// reader keys, and with publish_last of two groups and retain_previous.
func BenchmarkPublishLocal(b *testing.B) {
	ctx := context.Background()
	plain := benchPublication(b, 2000, 4096)
	grouped := plain
	grouped.PublishLast, grouped.RetainPrevious = []string{"dir0*/**", "dir1[0-4]/**"}, 10*time.Minute
	for _, v := range []struct {
		name string
		pub  engine.Publication
	}{{"", plain}, {"grouped-", grouped}} {
		pub := v.pub
		e := &engine.Engine{}
		b.Run(v.name+"first", func(b *testing.B) {
			b.SetBytes(2000 * 4096)
			for b.Loop() {
				b.StopTimer()
				root, err := local.New(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(v.name+"unchanged", func(b *testing.B) {
			root, err := local.New(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Publish(ctx, root, heldLease{}, pub); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				res, err := e.Publish(ctx, root, heldLease{}, pub)
				if err != nil || len(res.Written) != 0 {
					b.Fatalf("%v, %d written", err, len(res.Written))
				}
			}
		})
	}
}
