package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// TestHealthProbe: the container health check exits 0 on a 2xx answer and
// prints the body (so /metrics can be read through it), and exits 1 with
// the status and /readyz's one-line reason otherwise.
func TestHealthProbe(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: NATS not connected\nmore detail", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("distributor_events_in_flight 0\n"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)

	for _, tc := range []struct {
		name             string
		args             []string
		code             int
		stdout, stderrIs string
	}{
		{"alive", []string{"health", "--addr", addr}, 0, "ok\n", ""},
		{"wildcard host is probed on loopback", []string{"health", "--addr", "0.0.0.0:" + port}, 0, "ok\n", ""},
		{"empty host is probed on loopback", []string{"health", "--addr", ":" + port}, 0, "ok\n", ""},
		{"metrics body printed", []string{"health", "--addr", addr, "--path", "/metrics"}, 0, "distributor_events_in_flight 0\n", ""},
		{"not ready", []string{"health", "--addr", addr, "--ready"}, 1, "",
			"distributor: health check http://" + addr + "/readyz: 503 Service Unavailable: not ready: NATS not connected\n"},
		{"unknown path", []string{"health", "--addr", addr, "--path", "/nope"}, 1, "",
			"distributor: health check http://" + addr + "/nope: 404 Not Found: 404 page not found\n"},
		{"bad addr", []string{"health", "--addr", "9090"}, 2, "", "distributor: --addr \"9090\" must be host:port, e.g. 127.0.0.1:9090\n"},
		{"bad path", []string{"health", "--addr", addr, "--path", "readyz"}, 2, "", "distributor: --path \"readyz\" must start with /, e.g. /readyz\n"},
		{"zero timeout", []string{"health", "--addr", addr, "--timeout", "0s"}, 2, "", "distributor: --timeout 0: must be positive, e.g. 3s\n"},
		{"ready and path", []string{"health", "--ready", "--path", "/metrics"}, 2, "", "distributor: --ready and --path: give one (--ready is --path /readyz)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderrIs {
				t.Errorf("code %d stdout %q stderr %q; want %d %q %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderrIs)
			}
		})
	}
}

// TestHealthProbeNothingListening names the address and the flag to check.
func TestHealthProbeNothingListening(t *testing.T) {
	t.Parallel()
	addr := testenv.RefusedAddr(t)
	_, stderr, code := runCLI(t, "health", "--addr", addr)
	if code != 1 || !strings.HasPrefix(stderr, "distributor: health check http://"+addr+"/healthz: ") ||
		!strings.HasSuffix(stderr, "connection refused (is serve running with its HTTP listener on this address? see serve --http-addr)\n") {
		t.Errorf("code %d stderr %q", code, stderr)
	}
}

// TestHealthProbeFollowsTheConfiguration: without --addr the probe dials
// http.listen of --config, as serve with that file listens.
func TestHealthProbeFollowsTheConfiguration(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok " + r.URL.Path + "\n"))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	listening := write("listen.yaml", "http:\n  listen: 0.0.0.0:"+port+"\n")
	off := write("off.yaml", "http:\n  listen: \"off\"\n")

	stdout, stderr, code := runCLI(t, "health", "--config", listening, "--ready")
	if code != 0 || stdout != "ok /readyz\n" {
		t.Errorf("http.listen from the file: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runCLI(t, "health", "--config", off)
	if want := "distributor: http.listen is \"off\" in " + off + ": serve has no HTTP listener to probe; set http.listen or pass --addr\n"; code != 2 || stderr != want {
		t.Errorf("http.listen off: code %d stderr %q, want 2 %q", code, stderr, want)
	}
	// --addr wins over the file.
	stdout, _, code = runCLI(t, "health", "--config", off, "--addr", "127.0.0.1:"+port)
	if code != 0 || stdout != "ok /healthz\n" {
		t.Errorf("--addr over the file: code %d stdout %q", code, stdout)
	}
}
