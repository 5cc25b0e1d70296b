package consumer_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
)

// created is the manifest time of an env's first test bundle; each later
// one is a second newer (see env.bundle).
var created = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)

// env is one test's world: an embedded JetStream server with distributor's
// streams, a configuration whose local roots live in a temp folder, and a
// collector of every result event.
type env struct {
	t       testing.TB
	ctx     context.Context
	nats    natsServer
	js      jetstream.JetStream
	streams *events.Streams
	pub     *events.Publisher
	cfg     *config.Config
	base    string
	roots   map[string]string // placeholder name -> local folder
	s3      *testenv.S3       // nil unless the test uses S3
	bucket  string
	results *collector
	nbundle atomic.Int32
}

// newEnv starts the server and parses yaml, where @name@ stands for a fresh
// local folder (the same name gives the same folder, so roots can be shared)
// and @bucket@ for the S3 test bucket (which requires withS3).
func newEnv(t testing.TB, yaml string, withS3 bool) *env {
	t.Helper()
	return newEnvOn(t, testenv.NewNATS(t), yaml, withS3)
}

// natsServer is what an env connects to: one embedded server
// (*testenv.NATS) or a cluster (*testenv.Cluster).
type natsServer interface {
	Conn(t testing.TB) *nats.Conn
	ConnAs(t testing.TB, user string, opts ...nats.Option) *nats.Conn
	JetStream(t testing.TB) jetstream.JetStream
}

// newEnvOn is newEnv on a given server; the env's own connection is the
// server's first user.
func newEnvOn(t testing.TB, n natsServer, yaml string, withS3 bool) *env {
	t.Helper()
	return newEnvWith(t, n, events.SetupConfig{Storage: jetstream.MemoryStorage}, yaml, withS3)
}

// newEnvWith is newEnvOn with the streams set up by setup.
func newEnvWith(t testing.TB, n natsServer, setup events.SetupConfig, yaml string, withS3 bool) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, base: t.TempDir(), roots: map[string]string{}}
	e.nats = n
	e.js = e.nats.JetStream(t)
	// Setup is idempotent: on a cluster, retry it while the freshly started
	// (and busy) cluster still settles its first leaders.
	retry := time.Duration(0)
	if setup.Replicas > 1 {
		retry = time.Minute
	}
	testenv.Retry(t, retry, func() (err error) {
		e.streams, err = events.Setup(ctx, e.js, setup)
		return err
	}, "setting up the streams")
	e.pub = events.NewPublisher(e.js, e.streams.Subjects)
	if withS3 {
		e.s3 = testenv.NewS3(t)
		e.bucket = e.s3.Bucket(t)
	}
	e.cfg = e.parse(yaml)
	e.results = e.collect()
	return e
}

var placeholder = regexp.MustCompile(`@(\w+)@`)

func (e *env) parse(yaml string) *config.Config {
	e.t.Helper()
	var ferr error
	text := placeholder.ReplaceAllStringFunc(yaml, func(m string) string {
		name := m[1 : len(m)-1]
		if name == "bucket" {
			return e.bucket
		}
		if dir, ok := e.roots[name]; ok {
			return dir
		}
		dir := filepath.Join(e.base, "roots", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			ferr = err
		}
		e.roots[name] = dir
		return dir
	})
	if ferr != nil {
		e.t.Fatal(ferr)
	}
	cfg, err := config.Parse([]byte(text), "")
	if err != nil {
		e.t.Fatalf("config: %v\n%s", err, text)
	}
	return cfg
}

// bundle writes a local bundle of files under a fresh folder and returns its
// location and manifest digest. A bundle made later is a newer version:
// its manifest is created a second after the one made before it.
func (e *env) bundle(id string, files map[string]string) (location, digest string) {
	e.t.Helper()
	n := e.nbundle.Add(1)
	at := created.Add(time.Duration(n-1) * time.Second)
	dir := filepath.Join(e.base, "bundles", fmt.Sprintf("b%d", n))
	return dir, testenv.WriteBundle(e.t, dir, id, at, files)
}

// s3Bundle uploads a bundle of files to the test bucket under prefix.
func (e *env) s3Bundle(prefix, id string, files map[string]string) (location, digest string) {
	e.t.Helper()
	return e.s3BundleIn(e.bucket, prefix, id, files)
}

// s3BundleIn uploads a bundle of files to bucket under prefix.
func (e *env) s3BundleIn(bucket, prefix, id string, files map[string]string) (location, digest string) {
	e.t.Helper()
	local, digest := e.bundle(id, files)
	b, err := s3.NewFromClient(e.s3.Client, bucket, prefix, s3.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range append(sortedKeys(files), bundle.ManifestName) {
		data, err := os.ReadFile(filepath.Join(local, filepath.FromSlash(p)))
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := b.Put(e.ctx, p, strings.NewReader(string(data)), int64(len(data)), storage.PutOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return "s3://" + bucket + "/" + prefix, digest
}

// announce publishes a bundle-ready event and returns its id.
func (e *env) announce(ev events.BundleReady) string {
	e.t.Helper()
	if ev.ID == "" {
		ev.ID = events.NewEventID()
	}
	if _, _, err := e.pub.AnnounceBundle(e.ctx, ev); err != nil {
		e.t.Fatal(err)
	}
	return ev.ID
}

// node is one simulated serve process.
type node struct {
	name    string
	c       *consumer.Consumer
	nc      *nats.Conn // the consumer's connection
	lockNC  *nats.Conn // the lease connection (the same as nc unless splitLock)
	locker  lease.Locker
	cancel  context.CancelFunc
	done    chan error
	stopped time.Duration // how long Run took to return after cancel
	mu      sync.Mutex
}

// nodeConfig shapes a node.
type nodeConfig struct {
	name string
	// user is the NATS user the node connects as (default: the env's).
	user string
	opts consumer.Options
	// wrap replaces each destination's backend (fault injection).
	wrap func(d config.Destination, b storage.Backend) storage.Backend
	// wrapLocker replaces the node's KV locker.
	wrapLocker func(lease.Locker) lease.Locker
	leaseTTL   time.Duration // default 2s
	// leaseWait is the runner's wait for a held root lease (default 10s;
	// negative: none).
	leaseWait time.Duration
	// handOver bounds the runner's lease hand-overs (default serve's,
	// service.DefaultHandOver; Max < 0: none).
	handOver service.HandOver
	// splitLock gives the leases their own connection, so a test can cut
	// renewals without cutting the consumer.
	splitLock bool
	// open opens the node's backends (default: a stores.Opener of its own,
	// as serve has).
	open *stores.Opener
	log  zerolog.Logger
	// now is the node's clock (default: the real one), as a host whose
	// clock is off has.
	now func() time.Time
}

// fastOptions are consumer options scaled for tests.
func fastOptions() consumer.Options {
	return consumer.Options{
		Workers:         4,
		MaxDeliver:      20,
		BackOff:         []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		AckWait:         2 * time.Second,
		ShutdownTimeout: 5 * time.Second,
	}
}

// start runs a consumer with its own connection, stores and locker, like a
// separate serve process.
func (e *env) start(nc nodeConfig) *node {
	e.t.Helper()
	if nc.name == "" {
		nc.name = "node"
	}
	if nc.leaseTTL == 0 {
		nc.leaseTTL = 2 * time.Second
	}
	if nc.leaseWait == 0 {
		nc.leaseWait = 10 * time.Second
	}
	if nc.handOver == (service.HandOver{}) {
		nc.handOver = service.DefaultHandOver
	}
	connect := e.nats.Conn
	if nc.user != "" {
		connect = func(t testing.TB) *nats.Conn { return e.nats.ConnAs(t, nc.user) }
	}
	conn := connect(e.t)
	js, err := jetstream.New(conn)
	if err != nil {
		e.t.Fatal(err)
	}
	lockConn, lockJS := conn, js
	if nc.splitLock {
		lockConn = connect(e.t)
		if lockJS, err = jetstream.New(lockConn); err != nil {
			e.t.Fatal(err)
		}
	}
	// Look-ups and creation are retried: a fresh (and busy) cluster may
	// still be electing the bucket's or the durable's first leader.
	var kv jetstream.KeyValue
	testenv.Retry(e.t, time.Minute, func() (err error) {
		kv, err = lockJS.KeyValue(e.ctx, e.streams.Subjects.LeaseBucket())
		return err
	}, "the lease bucket")
	var locker lease.Locker = lease.NewKV(lockJS, kv, nc.name, nc.leaseTTL)
	if nc.wrapLocker != nil {
		locker = nc.wrapLocker(locker)
	}
	if nc.open == nil {
		nc.open = stores.New(e.cfg)
	}
	runner := &service.Service{
		Engine:    &engine.Engine{Version: "test", Log: nc.log},
		Clock:     nc.now,
		Config:    e.cfg,
		Stores:    &testStores{open: nc.open, s3: e.s3, wrap: nc.wrap},
		Locker:    locker,
		LeaseWait: max(nc.leaseWait, 0),
		HandOver:  nc.handOver,
	}
	opts := nc.opts
	opts.Log = nc.log
	n := &node{name: nc.name, nc: conn, lockNC: lockConn, locker: locker, done: make(chan error, 1)}
	n.c = consumer.New(js, e.streams.Subjects, runner, opts)
	// Create the durable before returning, so that announcements made right
	// after start are not missed by a consumer that does not exist yet.
	testenv.Retry(e.t, time.Minute, func() error { _, err := n.c.Durable(e.ctx); return err }, "the durable")
	ctx, cancel := context.WithCancel(e.ctx)
	n.cancel = cancel
	go func() { n.done <- n.c.Run(ctx) }()
	e.t.Cleanup(func() { n.stop(e.t, time.Minute) })
	return n
}

// stop cancels the node and waits up to limit for Run to return.
func (n *node) stop(t testing.TB, limit time.Duration) error {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel == nil {
		return nil
	}
	start := time.Now()
	n.cancel()
	n.cancel = nil
	select {
	case err := <-n.done:
		n.stopped = time.Since(start)
		return err
	case <-time.After(limit):
		t.Fatalf("%s: Run did not return within %s of cancel", n.name, limit)
	}
	return nil
}

// kill simulates a crash: the node's connections close (no ack, nak,
// heartbeat, renewal or release reaches the server) and its Run is cancelled.
func (n *node) kill(t testing.TB) {
	n.nc.Close()
	n.lockNC.Close()
	_ = n.stop(t, time.Minute)
}

// testStores opens local roots and bundles the way serve does (stores.Opener)
// and S3 ones on the test server; wrap injects faults per destination.
type testStores struct {
	open *stores.Opener
	s3   *testenv.S3
	wrap func(d config.Destination, b storage.Backend) storage.Backend
}

func (s *testStores) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	var (
		b   storage.Backend
		err error
	)
	// An S3 destination with its own endpoint is opened the production way
	// (its configured timeouts apply); others use the test server's client.
	if d.Backend == config.BackendS3 && d.Endpoint == "" {
		b, err = s3.NewFromClient(s.s3.Client, d.Bucket, d.Path, s3.Options{})
	} else {
		b, err = s.open.Destination(ctx, d)
	}
	if err != nil {
		return nil, err
	}
	if s.wrap != nil {
		b = s.wrap(d, b)
	}
	return b, nil
}

func (s *testStores) Bundle(ctx context.Context, location string) (storage.Backend, error) {
	if strings.HasPrefix(location, "s3://") && s.s3 != nil {
		loc, err := bundle.ParseLocation(location)
		if err != nil {
			return nil, err
		}
		return s3.NewFromClient(s.s3.Client, loc.Bucket, loc.Prefix, s3.Options{})
	}
	return s.open.Bundle(ctx, location)
}

// hooked is a backend with fault hooks. read runs before every ReadVersion
// (the first call of every publication attempt), put before every write
// of a non-reserved path lands (a Put, a staged output named), commit
// before every catalog commit; a non-nil error from a hook is returned
// instead of the call.
type hooked struct {
	storage.Backend
	read    func(ctx context.Context, path string) error // before every ReadVersion and versioned Open
	put     func(ctx context.Context, path string) error
	commit  func(ctx context.Context) error
	commits *atomic.Int32 // successful catalog writes
}

func (h *hooked) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if h.read != nil && storage.HasOption(opts, storage.Versioned) {
		if err := h.read(ctx, p); err != nil {
			return storage.Reader{}, err
		}
	}
	return h.Backend.Open(ctx, p, opts...)
}

func (h *hooked) hookReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if h.read != nil {
		if err := h.read(ctx, p); err != nil {
			return nil, "", err
		}
	}
	return h.Backend.ReadVersion(ctx, p, opts...)
}

func (h *hooked) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	if h.put != nil && !catalog.IsReserved(p) {
		if err := h.put(ctx, p); err != nil {
			return storage.ObjectInfo{}, err
		}
	}
	return h.Backend.Put(ctx, p, r, size, o)
}

// Stage runs put before each staged output is named.
func (h *hooked) Stage(ctx context.Context) storage.Stage {
	return testenv.HookedStage{Stage: h.Backend.Stage(ctx), Hook: func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		if h.put != nil && !catalog.IsReserved(p) {
			if err := h.put(ctx, p); err != nil {
				return storage.ObjectInfo{}, err
			}
		}
		return commit()
	}}
}

// PrepareCatalog runs commit before the catalog's commit.
func (h *hooked) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return testenv.HookedCatalog{PendingCatalog: h.Backend.PrepareCatalog(ctx, next, writes), Hook: func(ctx context.Context, commit func() (storage.Version, error)) (storage.Version, error) {
		if h.commit != nil {
			if err := h.commit(ctx); err != nil {
				return "", err
			}
		}
		v, err := commit()
		if err == nil && h.commits != nil {
			h.commits.Add(1)
		}
		return v, err
	}}
}

// collector keeps every result event in stream order.
type collector struct {
	mu   sync.Mutex
	list []events.Result
	bad  []string
}

func (e *env) collect() *collector {
	c := &collector{}
	oc, err := e.js.OrderedConsumer(e.ctx, e.streams.Subjects.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		r, err := events.DecodeResult(msg.Data())
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.bad = append(c.bad, fmt.Sprintf("%s: %v", msg.Subject(), err))
			return
		}
		if want := e.streams.Subjects.Result(r.Type, r.DestinationID, r.PipelineID); msg.Subject() != want {
			c.bad = append(c.bad, fmt.Sprintf("%s event %s on subject %s, want %s", r.Type, r.ID, msg.Subject(), want))
		}
		c.list = append(c.list, r)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cc.Stop)
	return c
}

// received counts the messages the collector got, undecodable ones too.
func (c *collector) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list) + len(c.bad)
}

// caughtUp waits until the collector has received every result event the
// events stream holds now.
func (e *env) caughtUp(timeout time.Duration) {
	e.t.Helper()
	info, err := e.streams.Events.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	stored := int(info.State.Msgs)
	e.waitFor(timeout, func() bool { return e.results.received() >= stored }, "the collector to receive the %d stored result events", stored)
}

// quiet waits until the durable has nothing pending or unacknowledged and
// the collector holds every result stored by then. Results are published
// before their bundle event is acknowledged, so no result of the work done
// can arrive later: what the collector holds is all of it.
func (e *env) quiet(timeout time.Duration) *jetstream.ConsumerInfo {
	e.t.Helper()
	info := e.settled(timeout)
	e.caughtUp(timeout)
	return info
}

func (c *collector) all() []events.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Result(nil), c.list...)
}

// of returns the results of one bundle event.
func (c *collector) of(eventID string) []events.Result {
	var out []events.Result
	for _, r := range c.all() {
		if r.BundleEventID == eventID {
			out = append(out, r)
		}
	}
	return out
}

// wait polls until n results of eventID arrived and the collector holds
// every result stored so far (an extra, wrong one included), and returns
// them sorted by destination.
func (e *env) wait(eventID string, n int, timeout time.Duration) []events.Result {
	e.t.Helper()
	e.waitFor(timeout, func() bool { return len(e.results.of(eventID)) >= n }, "%d result(s) of %s", n, eventID)
	e.caughtUp(timeout)
	out := e.results.of(eventID)
	sort.Slice(out, func(i, j int) bool { return out[i].DestinationID < out[j].DestinationID })
	return out
}

// waitFor polls cond until it holds or fails the test after timeout.
func (e *env) waitFor(timeout time.Duration, cond func() bool, what string, args ...any) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.dump()
			e.t.Fatalf("timed out after %s waiting for "+what, append([]any{timeout}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dump logs the last result events.
func (e *env) dump() {
	all := e.results.all()
	if len(all) > 30 {
		e.t.Logf("(%d earlier events not shown)", len(all)-30)
		all = all[len(all)-30:]
	}
	for _, r := range all {
		e.t.Logf("event: %s %s dest=%q reason=%q written=%d attempts=%d msg=%q", r.Type, r.BundleEventID, r.DestinationID, r.Reason, r.Written, r.Attempts, r.Message)
	}
}

// settled waits until the durable has acknowledged (or given up on) every
// bundle-ready event the stream holds now, with nothing pending or
// unacknowledged. The counts alone are not enough: on a cluster the
// durable's leader may answer from a replica of the stream that has not yet
// stored the last events, and then reports nothing pending. A failed
// look-up is retried until timeout (a cluster may be failing over).
func (e *env) settled(timeout time.Duration) *jetstream.ConsumerInfo {
	e.t.Helper()
	var last uint64
	testenv.Retry(e.t, timeout, func() error {
		si, err := e.streams.Bundles.Info(e.ctx)
		if err == nil {
			last = si.State.LastSeq
		}
		return err
	}, "the bundles stream's last sequence")
	var info *jetstream.ConsumerInfo
	var err error
	done := func() bool {
		info, err = e.durableInfo()
		return err == nil && info.AckFloor.Stream >= last && info.NumPending == 0 && info.NumAckPending == 0
	}
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			if err != nil {
				e.t.Fatal(err)
			}
			e.t.Fatalf("after %s the durable has acknowledged up to %d of %d, still %d pending, %d unacknowledged (%d redelivered; delivered %+v)",
				timeout, info.AckFloor.Stream, last, info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return info
}

func (e *env) durableInfo() (*jetstream.ConsumerInfo, error) {
	cons, err := e.js.Consumer(e.ctx, e.streams.Subjects.BundlesStream(), e.streams.Subjects.Durable())
	if err != nil {
		return nil, err
	}
	return cons.Info(e.ctx)
}

// checkNoBadEvents fails the test on undecodable or misfiled result events.
func (e *env) checkNoBadEvents() {
	e.t.Helper()
	e.results.mu.Lock()
	defer e.results.mu.Unlock()
	for _, b := range e.results.bad {
		e.t.Error(b)
	}
}

// readCatalog parses a root's catalog; it fails on absent, legacy or invalid.
func readCatalog(t testing.TB, b storage.Backend) *catalog.Catalog {
	t.Helper()
	data, _, err := b.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if data == nil {
		t.Fatalf("%s: no catalog", b)
	}
	cat, legacy, err := catalog.Parse(data)
	if err != nil || legacy {
		t.Fatalf("%s: catalog invalid (legacy=%v): %v\n%s", b, legacy, err, data)
	}
	return cat
}

// casLock is the local backend's lock file for catalog writes.
const casLock = ".distributor/cas.lock"

// files lists a root's objects (reserved ones but the local backend's
// catalog write lock included) with their digests.
func files(t testing.TB, b storage.Backend) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := b.List(ctx, "", func(o storage.ObjectInfo) error {
		if o.Path == casLock || strings.HasPrefix(o.Path, engine.FingerprintsDir+"/") { // kept indexes, not leftovers
			return nil
		}
		if o.Path == engine.IntentPath && o.Size == 0 { // a local root's intent file, emptied: none
			return nil
		}
		rc, err := b.Open(ctx, o.Path)
		if err != nil {
			return err
		}
		defer rc.Close()
		h := sha256.New()
		if _, err := io.Copy(h, rc); err != nil {
			return err
		}
		out[o.Path] = catalog.Digest(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func localRoot(t testing.TB, dir string) storage.Backend {
	t.Helper()
	b, err := stores.New(nil).Destination(context.Background(), config.Destination{ID: "x", Backend: config.BackendLocal, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return catalog.Digest(sum[:])
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// leaseKeyGone reports whether the root's lease key is absent.
func (e *env) leaseKeyGone(rootKey string) bool {
	_, err := e.streams.Leases.Get(e.ctx, lease.KVKey(rootKey))
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// logTo returns a logger writing to t's log (debugging aid).
func logTo(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).With().Timestamp().Logger()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Dispatch of the contract's calls to the hooks above.

func (h *hooked) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {

	return h.hookReadVersion(ctx, p, opts...)
}
