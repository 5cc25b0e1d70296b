package fakes3

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// putReq is one raw PUT: path, body, headers.
type putReq struct {
	path, body string
	hdr        map[string]string
	own        bool // answered by put, not gofakes3
}

// The PutObjects this server answers itself store and answer what
// gofakes3 does (status, ETag, error, then the object's HEAD and GET); the
// others, and every failure, are gofakes3's own answer.
func TestPutIsGofakes3s(t *testing.T) {
	t.Parallel()
	fast := New()
	fastSrv := httptest.NewServer(fast)
	plainSrv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(fastSrv.Close)
	t.Cleanup(plainSrv.Close)
	for _, u := range []string{fastSrv.URL, plainSrv.URL} {
		if st, _, _ := do(t, http.MethodPut, u+"/bkt", "", nil); st != http.StatusOK {
			t.Fatalf("create bucket: %d", st)
		}
	}
	meta := map[string]string{"Content-Type": "text/plain", "X-Amz-Meta-Sha256": "sha256:00ff", "Content-Disposition": "inline",
		"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD", "Cache-Control": "no-cache"}
	big := map[string]string{"X-Amz-Meta-Big": strings.Repeat("x", 2100)}
	etag := `"5d41402abc4b2a76b9719d911017c592"` // md5("hello")
	steps := []putReq{
		{path: "/bkt/k1?x-id=PutObject", body: "hello", hdr: meta, own: true},
		{path: "/bkt/k1", body: "again", hdr: map[string]string{"If-None-Match": "*"}},
		{path: "/bkt/k1?x-id=PutObject", body: "world", hdr: map[string]string{"If-Match": etag}, own: true},
		{path: "/bkt/k1", body: "stale", hdr: map[string]string{"If-Match": etag}},
		{path: "/bkt/k2", body: "new", hdr: map[string]string{"If-Match": `"abc"`}},
		{path: "/bkt/k3", body: "created", hdr: map[string]string{"If-None-Match": "*"}, own: true},
		{path: "/missing/k", body: "x"},
		{path: "/bkt/empty", body: "", own: true},
		{path: "/bkt/a%26b/%C3%A9t%C3%A9", body: "escaped key", own: true},
		{path: "/bkt/k4?tagging", body: "tagged"},
		{path: "/bkt/k5", body: "hello", hdr: map[string]string{"Content-MD5": "XUFAKrxLKna5cZ2REBfFkg=="}},
		{path: "/bkt/k6", body: "meta", hdr: big},
	}
	for _, s := range steps {
		before := fast.requestID.Load()
		gs, gh, gb := do(t, http.MethodPut, fastSrv.URL+s.path, s.body, s.hdr)
		if own := fast.requestID.Load() != before; own != s.own {
			t.Errorf("PUT %s: answered here = %v, want %v", s.path, own, s.own)
		}
		ws, wh, wb := do(t, http.MethodPut, plainSrv.URL+s.path, s.body, s.hdr)
		if gs != ws || gh.Get("ETag") != wh.Get("ETag") || !bytes.Equal(gb, wb) {
			t.Errorf("PUT %s:\n got %d %s %s\nwant %d %s %s", s.path, gs, gh.Get("ETag"), gb, ws, wh.Get("ETag"), wb)
		}
		key, _, _ := strings.Cut(s.path, "?")
		for _, m := range []string{http.MethodHead, http.MethodGet} {
			gs, gh, gb := do(t, m, fastSrv.URL+key, "", nil)
			ws, wh, wb := do(t, m, plainSrv.URL+key, "", nil)
			if gs != ws || !bytes.Equal(gb, wb) || headers(gh) != headers(wh) {
				t.Errorf("%s %s after PUT:\n got %d %s %s\nwant %d %s %s", m, key, gs, headers(gh), gb, ws, headers(wh), wb)
			}
		}
	}
}

// headers are the response headers but those of the moment (request ids,
// dates).
func headers(h http.Header) string {
	var b strings.Builder
	for _, k := range []string{"Etag", "Content-Type", "Content-Length", "Content-Disposition", "X-Amz-Meta-Sha256", "X-Amz-Meta-Big", "Accept-Ranges"} {
		fmt.Fprintf(&b, "%s=%q ", k, h.Values(k))
	}
	return b.String()
}

func do(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
		req.Header.Set("Content-Length", "0")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// Racing writes are each told their own object's ETag, and conditional
// ones stay atomic: each round, 8 writers replace the same version
// (If-Match) and 8 more overwrite it unconditionally, each with bytes of
// its own, 30 rounds. Every answered ETag is the MD5 of the writer's own
// bytes; at most one conditional writer wins a round, and the object then
// holds one writer's bytes.
func TestRacingPutsAreEachAnsweredTheirOwnETag(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New())
	t.Cleanup(srv.Close)
	if st, _, _ := do(t, http.MethodPut, srv.URL+"/bkt", "", nil); st != http.StatusOK {
		t.Fatalf("create bucket: %d", st)
	}
	_, h, _ := do(t, http.MethodPut, srv.URL+"/bkt/k", "round 0", nil)
	cur := h.Get("ETag")
	for round := 1; round <= 30; round++ {
		var mu sync.Mutex
		var condWins int
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				body := fmt.Sprintf("round %d writer %d", round, w)
				hdr := map[string]string{}
				if w%2 == 0 {
					hdr["If-Match"] = cur
				}
				st, h, _ := do(t, http.MethodPut, srv.URL+"/bkt/k", body, hdr)
				switch {
				case st == http.StatusOK && h.Get("ETag") != fmt.Sprintf("\"%x\"", md5.Sum([]byte(body))):
					t.Errorf("round %d writer %d: answered ETag %s for its bytes %q", round, w, h.Get("ETag"), body)
				case st == http.StatusOK && w%2 == 0:
					mu.Lock()
					condWins++
					mu.Unlock()
				case st != http.StatusOK && (w%2 != 0 || st != http.StatusPreconditionFailed):
					t.Errorf("round %d writer %d: status %d", round, w, st)
				}
			})
		}
		wg.Wait()
		_, h, got := do(t, http.MethodGet, srv.URL+"/bkt/k", "", nil)
		if condWins > 1 || !strings.HasPrefix(string(got), fmt.Sprintf("round %d writer ", round)) {
			t.Fatalf("round %d: %d conditional winners, object %q", round, condWins, got)
		}
		cur = h.Get("ETag")
	}
}
