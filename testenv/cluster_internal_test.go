package testenv

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestNodeOnTakenPortFailsFast: a node whose client port another process
// holds fails its start at once, naming the port, instead of waiting out
// clusterReady; NewCluster then starts again on fresh ports.
func TestNodeOnTakenPortFailsFast(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c := &Cluster{t: t, nodes: []*clusterNode{{opts: &server.Options{
		ServerName: "taken", Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true,
	}}}}
	defer c.shutdown()
	begin := time.Now()
	err = c.start(0)
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("start on a taken port: err = %v, want an error naming %s", err, l.Addr())
	}
	if took := time.Since(begin); took > clusterReady/2 {
		t.Fatalf("start on a taken port took %s, want it to fail fast", took)
	}
	if c.Running(0) {
		t.Fatal("node reported running after a failed start")
	}
}

// TestRestartOnTakenPort: a killed node whose client port another socket
// took meanwhile (as a reconnecting client's ephemeral port can) comes back
// on fresh ports as the same JetStream peer, and new connections find it.
func TestRestartOnTakenPort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := NewCluster(t)
	old := c.nodes[0].opts.Port
	c.Kill(0)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(old)))
	if err != nil {
		t.Skipf("the killed node's port %d was taken before the test could hold it: %v", old, err)
	}
	defer l.Close()
	c.Restart(0)
	if !c.Running(0) {
		t.Fatal("node 0 not running after Restart")
	}
	if port := c.nodes[0].opts.Port; port == old {
		t.Fatalf("node 0 restarted on its held port %d", old)
	}
	if !strings.Contains(c.ConnURLs(), c.nodes[0].srv.ClientURL()) {
		t.Fatalf("ConnURLs %q lacks node 0's new URL %s", c.ConnURLs(), c.nodes[0].srv.ClientURL())
	}
	// Only node 0 answers on the moved URL: a connection there works.
	nc, err := nats.Connect(c.nodes[0].srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}
