package main

import (
	"context"
	"html"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// TestServeStatusPage: serve's / names each destination with its live
// versions and the last publication and failure, escaping what comes from
// manifests and events; /status.json is status --json; other paths are
// 404; with NATS gone the page still answers at once.
func TestServeStatusPage(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	addr := testenv.FreeAddr(t)
	startServe(t, e.cfg, "--http-addr", addr)
	base := "http://" + addr
	schemas := schematest.New(t)

	_, page := waitGet(t, base+"/", func(c int, b string) bool { return c == http.StatusOK }, "the status page")
	for _, want := range []string{"<h2>d1</h2>", "<h2>d2</h2>", "<h2>d3</h2>", "none yet (nothing published)", "0 pending, 0 ack pending"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page before any publication lacks %q:\n%s", want, page)
		}
	}

	// A source id that is markup, published; then a bundle in a folder
	// whose name is markup, with a file changed after bundle create:
	// content_mismatch, its location in the failure.
	const evilID = `src.<script>alert("id")</script>`
	b1 := e.makeBundle(t, "b1", evilID, bundleOne)
	digest := digestOfFile(t, filepath.Join(b1, "manifest.json"))
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1); code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", code, stdout, stderr)
	}
	b2 := e.makeBundle(t, "<b>bad</b>", "src.two", map[string]string{"x.txt": "x\n"})
	if err := os.WriteFile(filepath.Join(b2, "x.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b2); code == 0 {
		t.Fatalf("publish of a changed bundle: exit 0\n%s%s", stdout, stderr)
	}

	// The page is read at most every 2 s: wait for one that has both.
	escapedID := html.EscapeString(evilID)
	_, page = waitGet(t, base+"/", func(c int, b string) bool {
		return c == http.StatusOK && strings.Contains(b, escapedID) && strings.Contains(b, "content_mismatch")
	}, "the published version and the failure on the page")
	d1 := section(t, page, "d1")
	for _, want := range []string{
		"<td>p.one</td><td>" + escapedID + "</td>",
		service.ShortDigest(digest) + "</code>",
		"<dt>last published</dt><dd class=\"wide\">",
		"from " + html.EscapeString(b1) + ": 2 written, 0 deleted, 0 unchanged",
		"<dt>last failure</dt><dd class=\"wide\">none in the events stream</dd>",
	} {
		if !strings.Contains(d1, want) {
			t.Errorf("d1 on the status page lacks %q:\n%s", want, d1)
		}
	}
	d3 := section(t, page, "d3")
	for _, want := range []string{"none yet (nothing published)", "<dt>last failure</dt><dd class=\"wide err\">", "/&lt;b&gt;bad&lt;/b&gt;", "failed: content_mismatch"} {
		if !strings.Contains(d3, want) {
			t.Errorf("d3 on the status page lacks %q:\n%s", want, d3)
		}
	}
	for _, raw := range []string{"<script", "<b>bad"} {
		if strings.Contains(page, raw) {
			t.Errorf("the status page holds %q unescaped:\n%s", raw, page)
		}
	}

	code, body := httpGet(t, base+"/status.json")
	if code != http.StatusOK {
		t.Fatalf("GET /status.json: %d %s", code, body)
	}
	if err := schemas.Validate(t, "cli-status.json", []byte(body)); err != nil {
		t.Errorf("/status.json does not match docs/schema/cli-status.json: %v\n%s", err, body)
	}
	var st statusJSON
	decodeJSON(t, "/status.json", body, &st)
	if len(st.Destinations) != 3 || !st.NATS.Known {
		t.Fatalf("/status.json: %s", body)
	}
	got := st.Destinations[0]
	if got.DestinationID != "d1" || len(got.Owners) != 1 || len(got.Owners[0].Sources) != 1 ||
		got.Owners[0].Sources[0].ID != evilID || got.Owners[0].Sources[0].Digest != digest ||
		got.LastPublished == nil || got.LastFailure != nil || got.Leftovers != nil {
		t.Errorf("/status.json d1: %+v", got)
	}
	if f := st.Destinations[2].LastFailure; f == nil || f.Reason != "content_mismatch" || f.Bundle != b2 {
		t.Errorf("/status.json d3's last failure: %+v, want content_mismatch from %s", f, b2)
	}

	for _, p := range []string{"/nope", "/index.html", "/status.json/x", "/status"} {
		if code, _ := httpGet(t, base+p); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, code)
		}
	}

	// NATS goes away: the page answers at once and says so, the roots
	// still read.
	e.nats.Server.Shutdown()
	_, page = waitGet(t, base+"/", func(c int, b string) bool {
		return c == http.StatusOK && strings.Contains(b, "NATS connection is RECONNECTING")
	}, "the page without NATS")
	if !strings.Contains(page, escapedID) || !strings.Contains(page, "unknown without NATS") {
		t.Errorf("the page without NATS:\n%s", page)
	}
	start := time.Now()
	httpGet(t, base+"/status.json")
	if took := time.Since(start); took > time.Second {
		t.Errorf("/status.json took %s without NATS", took)
	}
}

// section is the part of the status page about destination d.
func section(t *testing.T, page, d string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<section id="dest-`+d+`">`)
	if !ok {
		t.Fatalf("no section of %s on the status page:\n%s", d, page)
	}
	s, _, _ := strings.Cut(rest, "</section>")
	return s
}

// TestStatusPageCache: one read serves the requests of statusPageTTL,
// concurrent ones included, and outlives the request that started it.
func TestStatusPageCache(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	p := &statusPage{read: func(ctx context.Context) statusPageData {
		reads.Add(1)
		time.Sleep(50 * time.Millisecond) // the others wait meanwhile
		if ctx.Err() != nil {
			t.Errorf("the read ended with its request: %v", ctx.Err())
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > statusPageTimeout {
			t.Errorf("the read has no deadline within %s", statusPageTimeout)
		}
		return statusPageData{Time: time.Now()}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { p.get(ctx) })
	}
	time.Sleep(10 * time.Millisecond)
	cancel()
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads for 8 concurrent requests, want 1", n)
	}
	p.until = time.Now() // expired
	p.get(context.Background())
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads after the status expired, want 2", n)
	}
}
