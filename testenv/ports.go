package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address that nothing listens on, for a
// server that a test starts later on a fixed address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
}

// RefusedAddr returns a 127.0.0.1 address that refuses connections until
// the test ends, for a test of what a client says when nothing listens.
// A port from FreeAddr is free only when chosen: a server or port probe
// of a parallel test (of any process) may listen on it meanwhile, and a
// connection it takes and drops is reset, not refused. This port is held
// by a connected socket (bound, not listening), so nothing can listen on
// it.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: refused address: %v", err)
	}

	// The listener stays open: closing it would reset the connection in
	// its queue and free the port.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		l.Close()
		t.Fatalf("testenv: refused address: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		l.Close()
	})
	return c.LocalAddr().String()
}

// FreePorts returns n distinct TCP ports that nothing listens on at
// 127.0.0.1. They are chosen below the kernel's ephemeral range: a port
// from Listen(":0") is one the kernel also gives outgoing connections, and
// with tests in parallel one of those took it before the server listened.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := fixedPortRange()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for attempt := 0; len(ports) < n; attempt++ {
		addr := "127.0.0.1:0"
		if hi > lo && attempt < 100*n {
			addr = fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				t.Fatalf("testenv: free port: %v", err)
			}
			continue // taken
		}

		// Held until all are chosen, so that they are distinct.
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// fixedPortRange is where FreePorts looks: from 10000 up to the start of
// the ephemeral range, or an empty range (ports from Listen(":0")) if that
// leaves fewer than 1000 ports.
func fixedPortRange() (lo, hi int) {
	lo, hi = 10000, 32768 // Linux's default ephemeral range starts at 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(data), &first, &last); err == nil {
			hi = first
		}
	}
	if hi-lo < 1000 {
		return 0, 0
	}
	return lo, hi
}
