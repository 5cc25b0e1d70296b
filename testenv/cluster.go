package testenv

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterReady bounds how long a cluster start or a node restart may take to
// elect a JetStream meta leader.
const clusterReady = 30 * time.Second

// Cluster is an in-process 3-node JetStream cluster on 127.0.0.1. Nodes can
// be killed and restarted (same name and store; same ports unless another
// socket took one) to test fail-over. Everything stops when the test ends.
type Cluster struct {
	// URLs are the client URLs of every node, comma-separated (nats.Connect
	// form), as the cluster started. A node that Restart had to move is
	// only in ConnURLs.
	URLs string

	t     testing.TB
	mu    sync.Mutex
	urls  string // URLs as they are now
	nodes []*clusterNode
}

type clusterNode struct {
	opts *server.Options // kept to restart the node as itself
	srv  *server.Server  // nil while killed
}

// ClusterSize is the number of nodes NewCluster starts.
const ClusterSize = 3

// NewCluster starts the cluster and waits until JetStream has a meta leader.
// Ports are picked free and then released, so another process can take one
// before a node binds it: a node that cannot listen makes the whole cluster
// start again on fresh ports.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	const attempts = 5
	var err error
	for range attempts {
		var c *Cluster
		if c, err = tryCluster(t); err == nil {
			t.Cleanup(c.shutdown)
			c.waitMetaLeader(t)
			return c
		}
	}
	t.Fatalf("testenv: cluster did not start in %d attempts: %v", attempts, err)
	return nil
}

func tryCluster(t testing.TB) (*Cluster, error) {
	const name = "distributor-test"

	// Fixed ports, chosen now: a restarted node must come back on the same
	// addresses so that routes and clients find it again.
	clientPorts, routePorts := FreePorts(t, ClusterSize), FreePorts(t, ClusterSize)
	c := &Cluster{t: t}
	var urls []string
	for i := range ClusterSize {
		// TempDir first: cleanups run in reverse, so the node stops before
		// its store is removed.
		dir := t.TempDir()
		var routes []*url.URL
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, "js"),
			Cluster:    server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: routePorts[i]},
			Routes:     routes,
			NoSigs:     true,
			NoLog:      true,
		}
		c.nodes = append(c.nodes, &clusterNode{opts: opts})
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]))
	}
	c.URLs = strings.Join(urls, ",")
	c.urls = c.URLs

	// Start all nodes together: each waits for routes to the others.
	var wg sync.WaitGroup
	errs := make([]error, ClusterSize)
	for i := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.start(i) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(i int) error {
	n := c.nodes[i]

	// The server modifies its options; give each start a fresh copy.
	opts := n.opts.Clone()
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("configure node %d: %w", i, err)
	}

	// A node that cannot bind its ports reports it only through its logger
	// (as a fatal error) and then never turns ready: watch for it.
	fatal := &fatalLog{}
	s.SetLogger(fatal, false, false)
	go s.Start()
	for deadline := time.Now().Add(clusterReady); ; {
		if s.ReadyForConnections(50 * time.Millisecond) {
			break
		}
		if msg := fatal.message(); msg != "" || time.Now().After(deadline) {
			s.Shutdown()
			if msg == "" {
				msg = "not ready after " + clusterReady.String()
			}
			return fmt.Errorf("node %d: %s", i, msg)
		}
	}
	c.mu.Lock()
	n.srv = s
	c.mu.Unlock()
	return nil
}

// fatalLog is a server logger that keeps the first fatal message and
// discards the rest.
type fatalLog struct {
	mu    sync.Mutex
	first string
}

func (l *fatalLog) message() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *fatalLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first == "" {
		l.first = fmt.Sprintf(format, v...)
	}
}

func (*fatalLog) Noticef(string, ...any) {}
func (*fatalLog) Warnf(string, ...any)   {}
func (*fatalLog) Errorf(string, ...any)  {}
func (*fatalLog) Debugf(string, ...any)  {}
func (*fatalLog) Tracef(string, ...any)  {}

// waitMetaLeader waits until JetStream has a meta leader that every running
// node is current with and that sees every running node as an online peer
// (before that, placing a replicated stream can fail or stall).
func (c *Cluster) waitMetaLeader(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterReady)
	for {
		if c.metaReady() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: no JetStream meta leader after %s", clusterReady)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) metaReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var leaders, running, peers int
	for _, n := range c.nodes {
		if n.srv == nil {
			continue
		}
		running++
		if !n.srv.JetStreamIsCurrent() {
			return false
		}
		if n.srv.JetStreamIsLeader() {
			leaders++
			peers = len(n.srv.JetStreamClusterPeers())
		}
	}
	return leaders == 1 && peers == running
}

// Conn opens a client connection to the whole cluster that reconnects to
// surviving nodes without giving up; it is closed when the test ends.
func (c *Cluster) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	return c.ConnAs(t, "")
}

// ConnAs is Conn with extra options applied last; the cluster has no users,
// so user must be "".
func (c *Cluster) ConnAs(t testing.TB, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if user != "" {
		t.Fatalf("testenv: the cluster has no NATS users (asked for %q)", user)
	}
	all := []nats.Option{nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	urls := c.ConnURLs()
	nc, err := nats.Connect(urls, append(all, opts...)...)
	if err != nil {
		t.Fatalf("testenv: connect cluster %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// NodeURL is the client URL of node i alone.
func (c *Cluster) NodeURL(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.nodes[i].opts
	return fmt.Sprintf("nats://%s:%d", o.Host, o.Port)
}

// JetStream opens a new connection and returns its JetStream context. Calls
// without a deadline wait up to 15 s: on a busy machine a replicated
// stream's first leader election can outlast the default 5 s.
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(c.Conn(t), jetstream.WithDefaultTimeout(15*time.Second))
	if err != nil {
		t.Fatalf("testenv: JetStream: %v", err)
	}
	return js
}

// StreamLeader returns the index of the node that leads stream (in the
// global account), or -1 when no running node does.
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.srv != nil && n.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until a running node leads stream and returns it.
func (c *Cluster) WaitStreamLeader(t testing.TB, stream string) int {
	t.Helper()
	deadline := time.Now().Add(clusterReady)
	for {
		if i := c.StreamLeader(stream); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: stream %s has no leader after %s", stream, clusterReady)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitStreamCurrent waits until every running node has caught up with
// stream (in the global account), e.g. a restarted node.
func (c *Cluster) WaitStreamCurrent(t testing.TB, stream string) {
	t.Helper()
	deadline := time.Now().Add(clusterReady)
	for !c.streamCurrent(stream) {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: stream %s not current on every node after %s", stream, clusterReady)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) streamCurrent(stream string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.srv != nil && !n.srv.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return false
		}
	}
	return true
}

// Kill stops node i at once, as a crash would look to its peers and clients.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if s == nil {
		c.t.Fatalf("testenv: node %d is not running", i)
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts the killed node i again with its name, store and ports
// (fresh ports if its own stay taken) and waits until it has rejoined
// JetStream.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	running := c.nodes[i].srv != nil
	c.mu.Unlock()
	if running {
		c.t.Fatalf("testenv: node %d is already running", i)
	}

	// The node's old ports may still be held for a moment, or for good by a
	// socket the kernel gave one of them as its ephemeral port (a client
	// reconnecting to another node): retry a while, then move the node.
	err := c.startRetrying(i, portWait)
	if err != nil {
		c.t.Logf("testenv: node %d cannot start on its ports (%v); moving it to fresh ones", i, err)
		c.movePorts(i)
		err = c.startRetrying(i, clusterReady)
	}
	if err != nil {
		c.t.Fatalf("testenv: restart: %v", err)
	}
	c.waitMetaLeader(c.t)
}

// portWait bounds how long Restart retries a node's own ports before it
// moves the node to fresh ones.
const portWait = 2 * time.Second

func (c *Cluster) startRetrying(i int, wait time.Duration) error {
	var err error
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		if err = c.start(i); err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// movePorts gives the stopped node i fresh client and route ports. Its name
// and store keep it the same JetStream peer; the other nodes learn its new
// route from the node itself, clients its new URL from the servers' gossip,
// and the other nodes' options are updated for their own restarts.
func (c *Cluster) movePorts(i int) {
	ports := FreePorts(c.t, 2)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	oldRoute := fmt.Sprintf("127.0.0.1:%d", n.opts.Cluster.Port)
	n.opts.Port, n.opts.Cluster.Port = ports[0], ports[1]
	urls := make([]string, len(c.nodes))
	for j, m := range c.nodes {
		urls[j] = fmt.Sprintf("nats://127.0.0.1:%d", m.opts.Port)
		for _, r := range m.opts.Routes {
			if r.Host == oldRoute {
				r.Host = fmt.Sprintf("127.0.0.1:%d", ports[1])
			}
		}
	}
	c.urls = strings.Join(urls, ",")
}

// ConnURLs returns the client URLs of every node as they are now.
func (c *Cluster) ConnURLs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.urls
}

// Running reports whether node i is up.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv != nil
}

func (c *Cluster) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.srv != nil {
			n.srv.Shutdown()
			n.srv.WaitForShutdown()
			n.srv = nil
		}
	}
}
