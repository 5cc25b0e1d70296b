package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/natsserver"
)

// natsChildEnv makes a test binary started by NewNATSProcess run a NATS
// server instead of its tests (see Main): "<listen address> <store dir>".
const natsChildEnv = "DISTRIBUTOR_TESTENV_NATS_CHILD"

// NATSProcess is a JetStream server in a child process (the test binary
// itself, see Main), so that a test can kill it as a crash would — no
// shutdown, no flush of its state — and start it again on the same store
// and address. Connections from Conn reconnect across restarts.
type NATSProcess struct {
	// URL is the client URL; it stays the same across restarts.
	URL  string
	addr string
	dir  string
	t    testing.TB

	mu  sync.Mutex
	cmd *exec.Cmd
}

// NewNATSProcess starts the server for t; it is killed when the test ends.
func NewNATSProcess(t testing.TB) *NATSProcess {
	t.Helper()
	n := &NATSProcess{dir: t.TempDir(), t: t}

	// A free port, kept across restarts.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: pick a port: %v", err)
	}
	n.addr = l.Addr().String()
	l.Close()
	n.URL = "nats://" + n.addr
	n.Start()
	t.Cleanup(n.Kill)
	return n
}

// Start starts the server again after Kill, on the same store and address.
func (n *NATSProcess) Start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.t.Fatal("testenv: NATS process already running")
	}
	exe, err := os.Executable()
	if err != nil {
		n.t.Fatalf("testenv: %v", err)
	}
	var lastErr error

	// The port of a killed server may still be held for a moment.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), natsChildEnv+"="+n.addr+" "+n.dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			n.t.Fatalf("testenv: %v", err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			n.t.Fatalf("testenv: start NATS process: %v", err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) == "ready" {
			n.cmd = cmd
			return
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lastErr = fmt.Errorf("child said %q", line)
	}
	n.t.Fatalf("testenv: NATS process did not start: %v", lastErr)
}

// Kill kills the server with SIGKILL and waits for it to be gone.
func (n *NATSProcess) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
	n.cmd = nil
}

// Conn opens a connection that reconnects to the server for as long as
// the test runs; it is closed when the test ends.
func (n *NATSProcess) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	return n.ConnAs(t, "")
}

// ConnAs is Conn; the server has no users, so user must be "".
func (n *NATSProcess) ConnAs(t testing.TB, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if user != "" {
		t.Fatalf("testenv: the NATS process has no user %q", user)
	}
	all := []nats.Option{nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond),
		nats.RetryOnFailedConnect(true)}
	nc, err := nats.Connect(n.URL, append(all, opts...)...)
	if err != nil {
		t.Fatalf("testenv: connect NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream opens a new connection and returns its JetStream context.
func (n *NATSProcess) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.Conn(t))
	if err != nil {
		t.Fatalf("testenv: JetStream: %v", err)
	}
	return js
}

// runNATSChild is the child process of NewNATSProcess: it serves until
// killed.
func runNATSChild(spec string) int {
	addr, dir, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(os.Stderr, "testenv: bad %s %q\n", natsChildEnv, spec)
		return 2
	}
	srv, err := natsserver.Start(context.Background(), natsserver.Options{Listen: addr, StoreDir: dir})
	if err != nil {
		fmt.Println("failed")
		fmt.Fprintf(os.Stderr, "testenv: NATS child: %v\n", err)
		return 1
	}
	defer srv.Shutdown()
	fmt.Println("ready")
	select {}
}
