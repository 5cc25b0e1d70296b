package testenv_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// FreePorts gives distinct ports that can be listened on, outside the
// kernel's ephemeral range (where outgoing connections would take them).
func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	t.Parallel()
	ephemeral := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(data), &ephemeral)
	}
	ports := testenv.FreePorts(t, 20)
	if len(ports) != 20 {
		t.Fatalf("%d ports, want 20", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if ephemeral-10000 >= 1000 && (p < 10000 || p >= ephemeral) {
			t.Errorf("port %d outside [10000, %d)", p, ephemeral)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("listen on free port %d: %v", p, err)
		}
		l.Close()
	}
	if addr := testenv.FreeAddr(t); len(addr) < len("127.0.0.1:1") || addr[:10] != "127.0.0.1:" {
		t.Errorf("FreeAddr = %q, want 127.0.0.1:port", addr)
	}
}

// RefusedAddr refuses connections, and no listener of this or another
// process can take its port until the test ends.
func TestRefusedAddrRefusesUntilTheTestEnds(t *testing.T) {
	t.Parallel()
	addr := testenv.RefusedAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{addr, ":" + port} {
		if l, err := net.Listen("tcp", a); err == nil {
			l.Close()
			t.Fatalf("listened on %s, the port of RefusedAddr %s", a, addr)
		}
	}
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want connection refused", addr, err)
		}
	}
}
