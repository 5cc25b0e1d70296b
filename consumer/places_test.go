package consumer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// TestAHungBundleStoreHoldsNoRootsLease: three events for one local root
// are delivered together. The first publishes; the second's bundle store
// hangs (an S3 server that accepts connections and answers nothing), so
// that event never reaches its publication; the third waits for it in the
// root's line at most the lease wait, then publishes. The first's lease is
// not left to the hung event's place, where it would sit idle and renewed,
// the root shut for this process's later events and for every other
// process, as long as the bundle store hangs.
func TestAHungBundleStoreHoldsNoRootsLease(t *testing.T) {
	e := newEnv(t, "", false)
	srv := testenv.NewS3(t)
	srv.UseStandardChain(t) // the production opener reads the standard chain
	proxy := testenv.NewFreezableProxy(t, srv.URL)
	e.s3, e.bucket = srv, srv.Bucket(t)
	hungLoc, hungDigest := e.s3Bundle("hung/", "src.hung", map[string]string{"hung.md": "# hung\n"})
	e.s3 = nil // the node opens S3 bundles the production way: through the proxy
	e.cfg = e.parse(`
s3:
  region: us-east-1
  endpoint: ` + proxy.URL + `
  timeouts: {connect: 30s, first_byte: 30s, idle: 30s, attempts: 1}
pipelines:
  - {id: first, destinations: [live]}
  - {id: hung, destinations: [live]}
  - {id: third, destinations: [live]}
destinations:
  - {id: live, backend: local, path: "@live@", workflow: additive}
`)
	// The first publication waits until all three events are delivered:
	// the hung one's place is then behind it in the root's line.
	delivered := make(chan struct{})
	var started atomic.Bool
	hold := func(d config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, read: func(ctx context.Context, _ string) error {
			if started.CompareAndSwap(false, true) {
				select {
				case <-delivered:
				case <-ctx.Done():
				}
			}
			return nil
		}}
	}
	var logs testenv.SyncBuffer
	e.start(nodeConfig{opts: fastOptions(), wrap: hold, leaseWait: time.Second, log: zerolog.New(&logs)})

	proxy.Freeze()
	firstLoc, firstDigest := e.bundle("src.first", map[string]string{"first.md": "# first\n"})
	thirdLoc, thirdDigest := e.bundle("src.third", map[string]string{"third.md": "# third\n"})
	first := e.announce(events.BundleReady{PipelineID: "first", Bundle: firstLoc, ManifestDigest: firstDigest})
	hung := e.announce(events.BundleReady{PipelineID: "hung", Bundle: hungLoc, ManifestDigest: hungDigest})
	third := e.announce(events.BundleReady{PipelineID: "third", Bundle: thirdLoc, ManifestDigest: thirdDigest})
	testenv.Eventually(t, 10*time.Second, func() bool {
		info, err := e.durableInfo()
		return err == nil && info.NumAckPending >= 3
	}, "the three events to be delivered")
	close(delivered)

	// The lease wait (1 s) behind the hung event, the publication, slack.
	for _, id := range []string{first, third} {
		e.waitFor(8*time.Second, func() bool { return len(e.results.of(id)) > 0 }, "the result of %s while the bundle store hangs", id)
		if r := e.results.of(id)[0]; r.Type != events.TypePublished {
			t.Fatalf("%s: %s (%s %s), want published", id, r.Type, r.Reason, r.Message)
		}
	}
	if got := e.results.of(hung); len(got) != 0 {
		t.Fatalf("results of the hung event while its bundle store hangs: %+v, want none", got)
	}
	// The hung event held the third up in the root's line: still opening
	// its bundle before its turn, so the third's wait ran out; or its turn
	// came first and either the third's wait ran out while it held the
	// lease, or it gave the lease back when its own wait for the bundle
	// did (the two waits are the same lease wait: either ends first).
	if !strings.Contains(logs.String(), `"ahead_on_their_way":1`) && !strings.Contains(logs.String(), `"ahead_publishing":1`) &&
		!gaveLeaseBack(logs.String(), hung) {
		t.Fatalf("no warning naming one event ahead in the root's line, nor one of the hung event giving the lease back; log:\n%s", logs.String())
	}

	proxy.Unfreeze()
	e.waitFor(30*time.Second, func() bool { return len(e.results.of(hung)) > 0 }, "the result of the hung event")
	if r := e.results.of(hung)[0]; r.Type != events.TypePublished {
		t.Fatalf("hung event after the store resumed: %s (%s %s), want published", r.Type, r.Reason, r.Message)
	}
	e.settled(10 * time.Second)
	e.checkNoBadEvents()
}

// gaveLeaseBack reports whether the log holds the warning of event id
// giving its root's lease back because its bundle is still opening.
func gaveLeaseBack(log, id string) bool {
	for line := range strings.Lines(log) {
		if strings.Contains(line, `"event_id":"`+id+`"`) && strings.Contains(line, `"level":"warn"`) &&
			strings.Contains(line, `"message":"bundle still opening after the lease wait; giving the root's lease back and waiting for the bundle without it"`) {
			return true
		}
	}
	return false
}

// TestShutdownWithADeliveryWaitingForAWorker: one worker, busy with a
// publication that ends only when its context does; the next event is
// delivered and waits in the consume callback for a worker. A shutdown
// returns within ShutdownTimeout (the busy publication is abandoned) and
// both events are published by the next process, instead of the callback
// waiting for the worker, the worker for the shutdown, and the shutdown
// for the callback.
func TestShutdownWithADeliveryWaitingForAWorker(t *testing.T) {
	e := newEnv(t, `
pipelines:
  - {id: weather.daily, destinations: [live]}
destinations:
  - {id: live, backend: local, path: "@live@", workflow: additive}
`, false)
	var started atomic.Bool
	stuck := func(d config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, read: func(ctx context.Context, _ string) error {
			if started.CompareAndSwap(false, true) {
				<-ctx.Done() // a publication that hangs until abandoned
				return ctx.Err()
			}
			return nil
		}}
	}
	opts := fastOptions()
	opts.Workers = 1
	n := e.start(nodeConfig{name: "first", opts: opts, wrap: stuck})
	var ids []string
	for _, src := range []string{"src.one", "src.two"} {
		loc, digest := e.bundle(src, map[string]string{src + ".md": "# " + src + "\n"})
		ids = append(ids, e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest}))
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		info, err := e.durableInfo()
		return err == nil && info.NumAckPending >= 2
	}, "both events to be delivered")
	if err := n.stop(t, opts.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n.stopped > opts.ShutdownTimeout+5*time.Second {
		t.Fatalf("shutdown took %v, want within ShutdownTimeout (%v) and slack", n.stopped, opts.ShutdownTimeout)
	}
	e.start(nodeConfig{name: "second", opts: fastOptions()})
	for _, id := range ids {
		e.waitFor(30*time.Second, func() bool { return len(e.results.of(id)) > 0 }, "the result of %s", id)
		if r := e.results.of(id)[0]; r.Type != events.TypePublished {
			t.Fatalf("%s: %s (%s %s), want published", id, r.Type, r.Reason, r.Message)
		}
	}
	e.settled(10 * time.Second)
	e.checkNoBadEvents()
}
