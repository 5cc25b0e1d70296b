package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/testenv"
)

// restartableNATS is a JetStream server with a file store on a fixed
// TCP port that a test restarts with an empty store, as a server whose
// volume was lost comes back.
type restartableNATS struct {
	t    *testing.T
	addr string
	srv  *natsserver.Server
}

func newRestartableNATS(t *testing.T) *restartableNATS {
	n := &restartableNATS{t: t, addr: testenv.FreeAddr(t)}
	n.start()
	t.Cleanup(func() { n.srv.Shutdown() })
	return n
}

func (n *restartableNATS) start() {
	n.t.Helper()
	srv, err := natsserver.Start(context.Background(), natsserver.Options{Listen: n.addr, StoreDir: n.t.TempDir()})
	if err != nil {
		n.t.Fatal(err)
	}
	n.srv = srv
}

// restartEmpty stops the server and starts it again on the same port
// with a new, empty store.
func (n *restartableNATS) restartEmpty() {
	n.t.Helper()
	n.srv.Shutdown()
	n.start()
}

// js is a plain client's JetStream: it recreates nothing.
func (n *restartableNATS) js() jetstream.JetStream {
	n.t.Helper()
	nc, err := nats.Connect("nats://"+n.addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		n.t.Fatal(err)
	}
	return js
}

// TestServeRecreatesWhatARestartedNATSLost: a NATS server that comes back
// without its store loses serve's streams, lease bucket and durable.
// serve recreates them by itself (nothing else does) and publishes the
// next event without a restart; /readyz is 200 again once they are back.
// When `distributor publish` recreates the streams first, serve still
// recreates its durable, which takes the event announced before it.
func TestServeRecreatesWhatARestartedNATSLost(t *testing.T) {
	t.Parallel()
	n := newRestartableNATS(t)
	e := writeNATSConfig(t, "  url: nats://"+n.addr+"\n")
	httpAddr := testenv.FreeAddr(t)
	s := startServe(t, e.cfg, "--http-addr", httpAddr)
	ready := "http://" + httpAddr + "/readyz"
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1); code != 0 {
		t.Fatalf("publish before the restart: exit %d\n%s%s", code, stdout, stderr)
	}

	// Nothing but serve recreates anything: a plain client waits for the
	// durable, then announces.
	n.restartEmpty()
	js := n.js()
	s1 := events.Subjects{}
	restored := time.Now()
	waitUntil(t, 30*time.Second, "serve to recreate its durable", func() bool {
		_, err := js.Consumer(context.Background(), s1.BundlesStream(), s1.Durable())
		return err == nil
	})
	t.Logf("durable back %s after the restart", time.Since(restored).Round(time.Millisecond))
	waitGet(t, ready, func(c int, _ string) bool { return c == http.StatusOK }, "readyz once the durable is back")
	for _, check := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := js.Stream(ctx, s1.EventsStream()); return err },
		func(ctx context.Context) error { _, err := js.KeyValue(ctx, s1.LeaseBucket()); return err },
	} {
		if err := check(context.Background()); err != nil {
			t.Errorf("after serve recreated its durable: %v", err)
		}
	}
	b2 := e.makeBundle(t, "b2", "src.two", map[string]string{"two.txt": "two\n"})
	id := announcePlain(t, js, "p.two", b2)
	waitPublished(t, js, id, "d3", "p.two", 30*time.Second)
	if got := strings.Count(s.stderr.String(), "does not exist on NATS (a server restarted without its store"); got != 1 {
		t.Errorf("%d lines announcing the recreation, want 1:\n%s", got, s.stderr.String())
	}

	// `distributor publish` recreates the streams first, before serve is
	// even reconnected, and waits for the result.
	n.restartEmpty()
	b3 := e.makeBundle(t, "b3", "src.three", map[string]string{"three.txt": "three\n"})
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--timeout", "30s", "--pipeline", "p.two", "--bundle", b3)
	if code != 0 {
		t.Fatalf("publish right after the second restart: exit %d\n%s%s\nserve: %s", code, stdout, stderr, s.stderr.String())
	}
	assertBlocks(t, "publish --wait after the second restart", stdout, "published d3 p.two written 1, unchanged 0, deleted 0 | + three.txt")
	waitGet(t, ready, func(c int, _ string) bool { return c == http.StatusOK }, "readyz after the second restart")
}

// TestServeRecreatesADeletedLeaseBucket: a lease acquisition that finds
// the lease bucket gone recreates it and publishes at once, rather than
// failing the delivery until the bucket is back. The consumer's own
// look-up (periodic, or after an error of consuming) may find the bucket
// gone too and announce it as well: one line at least.
func TestServeRecreatesADeletedLeaseBucket(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	s := startServe(t, e.cfg)
	js := e.nats.JetStream(t)
	bucket := events.Subjects{}.LeaseBucket()
	if err := js.DeleteKeyValue(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	start := time.Now()
	id := announcePlain(t, js, "p.two", b1)
	waitPublished(t, js, id, "d3", "p.two", 20*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("published after %s, want at once (no redelivery back-off)", took)
	}
	if _, err := js.KeyValue(context.Background(), bucket); err != nil {
		t.Errorf("lease bucket after the publication: %v", err)
	}
	if got := strings.Count(s.stderr.String(), "key-value bucket "+bucket+" does not exist on NATS"); got < 1 {
		t.Errorf("no line announces the recreation of the bucket:\n%s", s.stderr.String())
	}
}

// announcePlain announces the bundle in dir through a plain client, as a
// producer does, and returns the event id.
func announcePlain(t *testing.T, js jetstream.JetStream, pipeline, dir string) string {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(dir, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	ev := events.BundleReady{ID: events.NewEventID(), PipelineID: pipeline, Bundle: dir, ManifestDigest: bundle.Digest(manifest)}
	if _, _, err := events.NewPublisher(js, events.Subjects{}).AnnounceBundle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

// waitPublished waits for the published result of event id on dest.
func waitPublished(t *testing.T, js jetstream.JetStream, id, dest, pipeline string, timeout time.Duration) {
	t.Helper()
	s := events.Subjects{}
	subject := s.Result(events.TypePublished, dest, pipeline)
	waitUntil(t, timeout, "published "+id+" on "+dest, func() bool {
		st, err := js.Stream(context.Background(), s.EventsStream())
		if err != nil {
			return false
		}
		msg, err := st.GetLastMsgForSubject(context.Background(), subject)
		if err != nil {
			return false
		}
		r, err := events.DecodeResult(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		return r.BundleEventID == id
	})
}

// waitUntil polls cond every 50 ms until it holds or fails the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
