package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// hookStores calls after once, after the first output (not distributor's
// own state) is written to a destination, and counts the reads of the lock
// object.
type hookStores struct {
	service.Stores
	once      sync.Once
	after     func()
	lockReads atomic.Int32
}

func (h *hookStores) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	b, err := h.Stores.Destination(ctx, d)
	if err != nil {
		return nil, err
	}
	return &hookBackend{Backend: b, h: h}, nil
}

type hookBackend struct {
	storage.Backend
	h *hookStores
}

func (b *hookBackend) hookReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == lease.LockPath {
		b.h.lockReads.Add(1)
	}
	return b.Backend.ReadVersion(ctx, p, opts...)
}

func (b *hookBackend) Put(ctx context.Context, p string, r io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := b.Backend.Put(ctx, p, r, size, opts)
	if err == nil && !strings.HasPrefix(p, ".distributor") {
		b.h.once.Do(b.h.after)
	}
	return oi, err
}

// Stage runs after once the first staged output is named.
func (b *hookBackend) Stage(ctx context.Context) storage.Stage {
	return testenv.HookedStage{Stage: b.Backend.Stage(ctx), Hook: func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		oi, err := commit()
		if err == nil && !strings.HasPrefix(p, ".distributor") {
			b.h.once.Do(b.h.after)
		}
		return oi, err
	}}
}

// TestDirectApplyOutlivesNATS: an apply that found NATS holds its KV lease
// and the root's lock object. When NATS goes away after the first output is
// written, the KV lease can no longer be renewed, but the lock object still
// fences the root: the run finishes, commits its catalog and exits 0.
func TestDirectApplyOutlivesNATS(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	b := e.makeBundle(t, "b", "src.two", files)

	const ttl = time.Second // the smallest KV lease TTL
	var out, errb testenv.SyncBuffer
	a := newApp(&out, &errb)
	a.leaseTTL = ttl
	// The result event cannot reach the stopped server: give up on it
	// soon instead of after the production bound.
	a.reportWait = 100 * time.Millisecond
	a.wrapStores = func(s service.Stores) service.Stores {
		return &hookStores{Stores: s, after: func() {
			e.nats.Server.Shutdown()
			// Past the KV lease's safety margin: before, the run failed
			// here with "lease lost" after writing everything.
			time.Sleep(ttl + ttl/2)
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	code := a.run(ctx, []string{"apply", "--pipeline", "p.two", "--bundle", b, "--config", e.cfg})
	if code != 0 {
		t.Fatalf("apply with NATS gone mid-run: exit %d\n%s%s", code, out.String(), errb.String())
	}
	t.Logf("apply took %v\n%s%s", time.Since(start).Round(time.Millisecond), out.String(), errb.String())
	if !strings.Contains(errb.String(), `"message":"could not publish the maintenance event"`) {
		t.Errorf("no warning that the result event could not be published: %s", errb.String())
	}

	root := e.roots["d3"]
	want := slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	})
	if got := catalogPaths(t, root); !slices.Equal(got, want) {
		t.Fatalf("catalog after the run: %v, want %v", got, want)
	}
	for p, content := range files {
		if got := readFile(t, filepath.Join(root, p)); got != content {
			t.Errorf("%s = %q, want %q", p, got, content)
		}
	}
	// The lock object was released.
	if _, err := os.Stat(filepath.Join(root, ".distributor", "lock")); !os.IsNotExist(err) {
		t.Errorf("lock object after the run: %v, want none", err)
	}
}

// applyTimed runs apply of bundleOne to d3 in-process and fails the test
// unless it exits 0; it returns how long it took.
func applyTimed(t *testing.T, e *natsEnv, a *app, out, errb *testenv.SyncBuffer) time.Duration {
	t.Helper()
	b := e.makeBundle(t, "b", "src.one", bundleOne)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	code := a.run(ctx, []string{"apply", "--pipeline", "p.two", "--bundle", b, "--config", e.cfg})
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("apply: exit %d after %v\n%s%s", code, took, out.String(), errb.String())
	}
	for p, content := range bundleOne {
		if got := readFile(t, filepath.Join(e.roots["d3"], p)); got != content {
			t.Errorf("%s = %q, want %q", p, got, content)
		}
	}
	return took
}

// TestDirectIgnoresTCPListener: something that accepts connections on
// nats.listen but is not an advertised serve (here a raw TCP listener that
// never answers) is not dialled: apply publishes at once with the lock
// object. Before, apply waited 5 s for the INFO handshake and failed.
func TestDirectIgnoresTCPListener(t *testing.T) {
	t.Parallel()
	addr, accepted := silentListener(t)
	e := writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n")
	var out, errb testenv.SyncBuffer
	took := applyTimed(t, e, newApp(&out, &errb), &out, &errb)
	if took > 3*time.Second { // the bug was a 5 s hang; a loaded CI machine may be slow
		t.Errorf("apply took %v beside a silent TCP listener, want well under the 5 s the old probe hung", took)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("apply opened %d connection(s) to the stranger on nats.listen, want 0", n)
	}
	if errb.String() != "" {
		t.Errorf("stderr %q, want nothing (direct mode is silent)", errb.String())
	}
}

// TestDirectIgnoresForeignNATS: a NATS server on nats.listen that no serve
// of this configuration advertises gets no distributor stream, whatever
// advertisement lies in the store folder: none, a dead serve's, another
// configuration's, or one naming another server (the address was reused).
func TestDirectIgnoresForeignNATS(t *testing.T) {
	t.Parallel()
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ad   func(cfg string, foreign *natsserver.Server) *advert
	}{
		{"no advertisement", func(string, *natsserver.Server) *advert { return nil }},
		{"dead serve", func(cfg string, f *natsserver.Server) *advert {
			return &advert{URL: f.ClientURL(), ServerName: f.Name(), ServerID: f.ID(), PID: dead.ProcessState.Pid(), Config: configHash(cfg)}
		}},
		{"another configuration", func(_ string, f *natsserver.Server) *advert {
			return &advert{URL: f.ClientURL(), ServerName: f.Name(), ServerID: f.ID(), PID: os.Getpid(), Config: configHash("/elsewhere/distributor.yaml")}
		}},
		{"another server", func(cfg string, f *natsserver.Server) *advert {
			return &advert{URL: f.ClientURL(), ServerName: f.Name(), ServerID: "NOTTHESERVERSERVEADVERTISED", PID: os.Getpid(), Config: configHash(cfg)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			foreign := testenv.NewNATS(t)
			store := filepath.Join(t.TempDir(), "nats")
			addr := strings.TrimPrefix(foreign.URL, "nats://")
			e := writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+store+"\n")
			if ad := tt.ad(e.cfg, foreign.Server); ad != nil {
				data, _ := json.Marshal(ad)
				if err := os.MkdirAll(store, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(store, advertFile), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out, errb testenv.SyncBuffer
			a := newApp(&out, &errb)
			took := applyTimed(t, e, a, &out, &errb)
			if took > 3*time.Second {
				t.Errorf("apply took %v, want well under the 5 s the old probe hung", took)
			}
			info, err := foreign.JetStream(t).AccountInfo(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.Streams != 0 {
				t.Errorf("the foreign server has %d stream(s) after apply, want 0", info.Streams)
			}
		})
	}
}

// TestDirectUsesAdvertisedServe: with `serve` of this configuration
// running its embedded server, apply takes the KV lease there (serve's
// workers see it) and publishes its result event; when serve stops, its
// advertisement goes with it.
func TestDirectUsesAdvertisedServe(t *testing.T) {
	t.Parallel()
	e, addr := newOfflineEnv(t)
	s := startServe(t, e.cfg)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "DISTRIBUTOR_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	var out, errb testenv.SyncBuffer
	a := newApp(&out, &errb)
	a.wrapStores = func(st service.Stores) service.Stores {
		return &hookStores{Stores: st, after: func() {
			keys, err := kv.ListKeys(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for k := range keys.Keys() {
				if e, err := kv.Get(context.Background(), k); err == nil {
					holders = append(holders, string(e.Value()))
				}
			}
		}}
	}
	applyTimed(t, e, a, &out, &errb)
	if len(holders) != 1 || !strings.Contains(holders[0], `"holder":"direct `) || !strings.Contains(holders[0], e.roots["d3"]) {
		t.Errorf("KV leases during apply: %q, want one held by direct on %s", holders, e.roots["d3"])
	}
	got := e.tailJSON(t, "--type", "published", "--pipeline", "p.two")
	if len(got) != 1 || got[0].DestinationID != "d3" || got[0].Written != 2 {
		t.Errorf("published events after apply: %+v, want apply's one for d3 with 2 written", got)
	}

	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	adPath := filepath.Join(cfg.NATS.StoreDir, advertFile)
	if ad, err := readAdvertFile(adPath); err != nil || ad.URL != "nats://"+addr || ad.PID != os.Getpid() {
		t.Errorf("advertisement while serve runs: %+v, %v; want nats://%s and this process", ad, err, addr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if _, err := os.Stat(adPath); !os.IsNotExist(err) {
		t.Errorf("advertisement after serve stopped: %v, want none", err)
	}
}

// silentListener is a TCP listener on a loopback port that accepts
// connections, counts them and never answers: something on nats.listen that
// is no NATS server. It closes with the test.
func silentListener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	return l.Addr().String(), accepted
}

// Dispatch of the contract's calls to the hooks above.

func (b *hookBackend) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {

	return b.hookReadVersion(ctx, p, opts...)
}
