package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// BenchmarkWithLease is the cost of taking and giving back a root's lease
// (the lock object in a local root) around an empty publication, one at a
// time: nothing queues, so nothing is handed over.
func BenchmarkWithLease(b *testing.B) {
	root, err := local.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	d := config.Destination{ID: "d", Backend: "local", Path: root.String()}
	st := &testStores{}
	st.Add(d, root)
	r := &service.Service{Engine: &engine.Engine{}, Config: &config.Config{Destinations: []config.Destination{d}}, Stores: st,
		Locker: lease.NewStorageLocker("bench", time.Minute), LeaseWait: time.Second}
	ctx := context.Background()
	for b.Loop() {
		if err := r.WithLease(ctx, d, func(storage.Backend, lease.Lease) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
