package testenv

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// FreezableProxy is a TCP proxy in front of a server. Frozen, it behaves
// like a server stopped with SIGSTOP: connections are still accepted, but
// no byte moves in either direction (what was read stays in the proxy and
// the kernel buffers fill) until Unfreeze, which lets the held bytes through.
// Trickling, it passes the server's answers on one byte at a time.
type FreezableProxy struct {
	// URL is the proxy's address in the target's form: http://127.0.0.1:port
	// for a URL target, 127.0.0.1:port for a host:port target.
	URL string

	ln     net.Listener
	target string

	mu      sync.Mutex
	thawed  chan struct{} // closed while not frozen
	trickle time.Duration // > 0: the server's bytes pass one per trickle
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewFreezableProxy proxies to target (a URL such as testenv.S3.URL, or
// host:port) until the test ends.
func NewFreezableProxy(t testing.TB, target string) *FreezableProxy {
	t.Helper()
	addr := target
	u, err := url.Parse(target)
	isURL := err == nil && u.Host != "" && u.Scheme != ""
	if isURL {
		addr = u.Host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FreezableProxy{ln: ln, target: addr, thawed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.thawed)
	p.URL = ln.Addr().String()
	if isURL {
		p.URL = u.Scheme + "://" + p.URL
	}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Freeze stops all traffic, on open and new connections.
func (p *FreezableProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Unfreeze lets traffic, including what was held, flow again.
func (p *FreezableProxy) Unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// Trickle makes the server's bytes (answers), on open and new
// connections, pass one every d: a server that is slow but never idle
// for d. Trickle(0) lets them flow again.
func (p *FreezableProxy) Trickle(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trickle = d
}

func (p *FreezableProxy) trickling() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trickle
}

func (p *FreezableProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

func (p *FreezableProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *FreezableProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.Unfreeze()
}

func (p *FreezableProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		go func() {
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				return
			}
			if !p.track(server) {
				client.Close()
				return
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(server, client, false) }()
			go func() { defer wg.Done(); p.pipe(client, server, true) }()
			wg.Wait()
			client.Close()
			server.Close()
			p.mu.Lock()
			delete(p.conns, client)
			delete(p.conns, server)
			p.mu.Unlock()
		}()
	}
}

// pipe copies src to dst, holding each chunk while the proxy is frozen
// (and, for the server's bytes, trickling them while it trickles). An end
// of input half-closes dst, so that an answer can still come back.
func (p *FreezableProxy) pipe(dst, src net.Conn, fromServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if werr := p.write(dst, buf[:n], fromServer); werr != nil {
				src.Close()
				dst.Close()
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
				return
			}
			src.Close()
			dst.Close()
			return
		}
	}
}

// write writes b to dst, a byte at a time while the proxy trickles the
// server's bytes.
func (p *FreezableProxy) write(dst net.Conn, b []byte, fromServer bool) error {
	for len(b) > 0 {
		d := time.Duration(0)
		if fromServer {
			d = p.trickling()
		}
		if d <= 0 {
			_, err := dst.Write(b)
			return err
		}
		time.Sleep(d)
		if _, err := dst.Write(b[:1]); err != nil {
			return err
		}
		b = b[1:]
	}
	return nil
}
