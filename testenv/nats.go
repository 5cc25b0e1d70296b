package testenv

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/natsserver"
)

// NATS is an embedded JetStream server listening on a random 127.0.0.1
// port, with its store in a temp directory. It stops when the test ends.
type NATS struct {
	// URL is the client URL ("nats://127.0.0.1:<port>") for code that dials.
	URL    string
	Server *natsserver.Server
}

// NewNATS starts a fresh server for t.
func NewNATS(t testing.TB) *NATS {
	t.Helper()
	// TempDir first: cleanups run in reverse, so the server stops before
	// its store is removed.
	dir := t.TempDir()
	s, err := natsserver.Start(context.Background(), natsserver.Options{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("testenv: start NATS: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return &NATS{URL: s.ClientURL(), Server: s}
}

// Conn opens a client connection that is closed when the test ends.
func (n *NATS) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := n.Server.Connect(nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("testenv: connect NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream opens a new connection and returns its JetStream context.
func (n *NATS) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.Conn(t))
	if err != nil {
		t.Fatalf("testenv: JetStream: %v", err)
	}
	return js
}
