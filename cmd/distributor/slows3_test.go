package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/testenv"
)

// spanProxy is a reverse proxy in front of an S3 server that holds every
// answer for delay (a distant or slow server) and records each request.
type spanProxy struct {
	URL    string
	bucket string
	delay  time.Duration

	mu    sync.Mutex
	spans []reqSpan
}

// reqSpan is one request: its method and key, and when it ran.
type reqSpan struct {
	line       string
	start, end time.Time
}

func newSpanProxy(t *testing.T, target, bucket string, delay time.Duration) *spanProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &spanProxy{bucket: bucket, delay: delay}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		time.Sleep(p.delay)
		rp.ServeHTTP(w, r)
		key := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+p.bucket), "/")
		line := r.Method + " " + key
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			line = "LIST " + r.URL.Query().Get("prefix")
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.spans = append(p.spans, reqSpan{line: line, start: start, end: time.Now()})
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *spanProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spans = nil
}

// sequential is the longest chain of requests each of which started after
// the one before it ended: the requests a run waits for one after another.
func (p *spanProxy) sequential() (n int, chain []string) {
	p.mu.Lock()
	spans := append([]reqSpan(nil), p.spans...)
	p.mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i].end.Before(spans[j].end) })
	var last time.Time
	for _, s := range spans {
		if !s.start.Before(last) {
			chain = append(chain, s.line)
			last = s.end
		}
	}
	return len(chain), chain
}

func (p *spanProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spans)
}

// s3ApplyEnv is a configuration with one S3 destination (prefix site/)
// reached through endpoint, and a bundle of three small files.
func s3ApplyEnv(t *testing.T, endpoint, bucket, extra string) (cfg, bundleDir string) {
	t.Helper()
	dir := t.TempDir()
	bundleDir = filepath.Join(dir, "bundle")
	testenv.WriteBundle(t, bundleDir, "weatherreporter.today", time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC),
		map[string]string{"report.md": "# Today\n", "data.csv": "a,b\n1,2\n", "img/logo.txt": "logo\n"})
	cfg = filepath.Join(dir, "distributor.yaml")
	yaml := fmt.Sprintf(`nats:
  listen: 127.0.0.1:1
%spipelines:
  - id: p
    destinations: [site]
destinations:
  - id: site
    backend: s3
    bucket: %s
    path: site/
    region: us-east-1
    endpoint: %s
    path_style: true
`, extra, bucket, endpoint)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, bundleDir
}

// A small apply against a slow S3 (every answer held 200 ms) waits for
// as few requests one after another as it can. A 3-file apply to an
// empty prefix: the lock; the intent, pending report and catalog at once;
// the listing and the fingerprint index at once; the intent, the files,
// the catalog; the intent removed and the lock released (each a check and
// a conditional delete). Then the same apply again, which changes
// nothing: the lock; the reads; the lock released.
func TestSmallS3ApplyWaitsForFewRequests(t *testing.T) {
	srv := testenv.NewS3(t)
	if srv.External {
		t.Skip("times the requests of the in-process server")
	}
	srv.UseStandardChain(t)
	bucket := srv.Bucket(t)
	proxy := newSpanProxy(t, srv.URL, bucket, 200*time.Millisecond)
	cfg, dir := s3ApplyEnv(t, proxy.URL, bucket, "")
	for _, run := range []struct {
		name string
		most int
	}{{"first", 10}, {"again", 5}} {
		proxy.reset()
		start := time.Now()
		code, stdout, stderr := runCmd(t, "apply", "--pipeline", "p", "--bundle", dir, "--config", cfg)
		took := time.Since(start)
		if code != 0 {
			t.Fatalf("%s apply: exit %d\n%s%s", run.name, code, stdout, stderr)
		}
		n, chain := proxy.sequential()
		t.Logf("%s apply: %d requests, %d one after another, %v: %s", run.name, proxy.count(), n, took.Round(time.Millisecond), strings.Join(chain, " → "))
		if n > run.most {
			t.Errorf("%s apply waited for %d requests one after another, want at most %d: %s", run.name, n, run.most, strings.Join(chain, " → "))
		}
	}
}

// apply against an S3 server that answers nothing stops at its deadline
// (--timeout, else publication_timeout) with a message naming it, long
// before the server's own limits (30 s a request, 3 tries) would end it;
// each request cut is logged at warn as it happens.
func TestApplyStopsAtItsTimeout(t *testing.T) {
	srv := testenv.NewS3(t)
	srv.UseStandardChain(t)
	bucket := srv.Bucket(t)
	proxy := testenv.NewFreezableProxy(t, srv.URL)
	for _, c := range []struct {
		name, extra string
		args        []string
		want        string
	}{
		{"flag", "", []string{"--timeout", "1s"}, "apply did not finish within 1s (--timeout): "},
		{"config", "publication_timeout: 1s\n", nil, "apply did not finish within 1s (publication_timeout): "},
	} {
		t.Run(c.name, func(t *testing.T) {
			proxy.Freeze()
			defer proxy.Unfreeze()
			cfg, dir := s3ApplyEnv(t, proxy.URL, bucket, c.extra)
			start := time.Now()
			code, stdout, stderr := runCmd(t, append([]string{"apply", "--pipeline", "p", "--bundle", dir, "--config", cfg}, c.args...)...)
			took := time.Since(start)
			t.Logf("exit %d after %v\n%s%s", code, took.Round(time.Millisecond), stdout, stderr)
			if code != exitFailed || !strings.Contains(stderr, c.want) {
				t.Errorf("apply against a frozen S3: exit %d, stderr %q; want exit %d naming %q", code, stderr, exitFailed, c.want)
			}
			if took > 10*time.Second {
				t.Errorf("apply took %v, want it to stop at its 1s deadline", took)
			}
		})
	}
	t.Run("cut requests are logged", func(t *testing.T) {
		proxy.Freeze()
		defer proxy.Unfreeze()
		cfg, dir := s3ApplyEnv(t, proxy.URL, bucket, "s3:\n  timeouts: {first_byte: 300ms, attempts: 1}\n")
		code, _, stderr := runCmd(t, "apply", "--pipeline", "p", "--bundle", dir, "--config", cfg, "--log-format", "json")
		if code != exitFailed || !strings.Contains(stderr, `"level":"warn"`) || !strings.Contains(stderr, "S3 request cut") ||
			!strings.Contains(stderr, "did not answer within 300ms (first byte)") {
			t.Errorf("apply against a frozen S3 with first_byte 300ms: exit %d, stderr %q; want a warning per request cut", code, stderr)
		}
	})
}
