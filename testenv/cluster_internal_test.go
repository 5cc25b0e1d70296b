package testenv

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNodeOnTakenPortFailsFast: a node whose client port another process
// holds fails its start at once, naming the port, instead of waiting out
// clusterReady; NewCluster then starts again on fresh ports.
func TestNodeOnTakenPortFailsFast(t *testing.T) {
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
