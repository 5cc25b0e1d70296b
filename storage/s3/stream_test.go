package s3_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// An object over 1 MiB and up to SinglePutMax is not kept by the stage:
// Put reads and checks it (no request), and Commit sends it from its
// source again as one PutObject signed with its sha256 — streamed from the source when
// it is over a part, from one buffer below — never a multipart upload.
func TestMidSizeObjectsArePutWhole(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b, seen := stageBackend(t, env, bucket, s3store.Options{})
	for _, size := range []int{3 << 20, 12 << 20} {
		data := bytes.Repeat([]byte("mid-size object\n"), size/16)
		digest := sha(data)
		st := b.Stage(t.Context())
		_, err := st.Put(t.Context(), "m.bin", readerSource(bytes.NewReader(data)), int64(len(data)), storage.PutOptions{SHA256: digest, IfAbsent: true})
		if err != nil {
			t.Fatalf("%d bytes: staged Put: %v", size, err)
		}
		if s := seen(); len(s) != 0 {
			t.Fatalf("%d bytes: requests with a body after the stage: %q, want none", size, s)
		}
		wantNoObject(t, b, "m.bin")
		if _, err := st.Commit(t.Context(), "m.bin"); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if s := seen(); len(s) != 1 || s[0] != "/"+bucket+"/m.bin "+strings.TrimPrefix(digest, "sha256:") {
			t.Fatalf("%d bytes: requests with a body: %q, want one PutObject signed with the object's sha256", size, s)
		}
		got, _, err := b.ReadVersion(t.Context(), "m.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: stored %d bytes, %v", size, len(got), err)
		}
		if si, err := b.Stat(t.Context(), "m.bin"); err != nil || si.SHA256 != digest {
			t.Fatalf("%d bytes: Stat = %+v, %v; want the sha256 metadata", size, si, err)
		}
		if err := b.Delete(t.Context(), "m.bin"); err != nil {
			t.Fatal(err)
		}
		b, seen = stageBackend(t, env, bucket, s3store.Options{})
	}
	wantNoUploads(t, env.Client, bucket)
}

// endErrReader yields data and then, instead of io.EOF, err: a bundle
// file whose digest turns out wrong at its end.
type endErrReader struct {
	r   io.Reader
	err error
}

func (e *endErrReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

// A streamed Put never completes with bytes that are not the object's: a
// source failing at its very end (after the announced size), a wrong
// digest, too few or too many bytes. The old object (or none) stays.
func TestStreamedPutNeverLandsAWrongSource(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", s3store.Options{})
	v1, err := b.Put(t.Context(), "old", strings.NewReader("v1"), 2, storage.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{'s'}, 12<<20)
	errDamaged := errors.New("bundle file damaged")
	for _, c := range []struct {
		name, want string
		r          func() io.Reader
		size       int64
		digest     string
		verified   bool
	}{
		{"fails at its end", errDamaged.Error(), func() io.Reader { return &endErrReader{bytes.NewReader(data), errDamaged} }, int64(len(data)), sha(data), true},
		{"wrong digest", "does not match", func() io.Reader { return bytes.NewReader(data) }, int64(len(data)), sha([]byte("x")), false},
		{"short", "announced", func() io.Reader { return bytes.NewReader(data[1:]) }, int64(len(data)), sha(data), true},
		{"long", "more than", func() io.Reader { return bytes.NewReader(data) }, int64(len(data)) - 1, sha(data), true},
	} {
		for _, p := range []string{"old", "new"} {
			opts := storage.PutOptions{SHA256: c.digest, SourceVerified: c.verified, IfAbsent: p == "new"}
			if p == "old" {
				opts.IfMatch = v1.Fingerprint
			}
			_, err := b.Put(t.Context(), p, c.r(), c.size, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: Put error = %v, want one containing %q", c.name, p, err, c.want)
			}
		}
	}
	if got, _, err := b.ReadVersion(t.Context(), "old"); err != nil || string(got) != "v1" {
		t.Fatalf("old = %d bytes, %v; want v1", len(got), err)
	}
	wantNoObject(t, b, "new")
}

// A streamed Put carries the write's condition to the server.
func TestStreamedPutConditions(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", s3store.Options{})
	data := bytes.Repeat([]byte{'c'}, 10<<20)
	put := func(opts storage.PutOptions) (storage.ObjectInfo, error) {
		opts.SHA256, opts.SourceVerified = sha(data), true
		return b.Put(t.Context(), "c.bin", bytes.NewReader(data), int64(len(data)), opts)
	}
	v1, err := put(storage.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(storage.PutOptions{IfAbsent: true}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create over an object: %v, want ErrConflict", err)
	}
	rawPut(t, env.Client, bucket, "c.bin", "other")
	if _, err := put(storage.PutOptions{IfMatch: v1.Fingerprint}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("replace of a changed object: %v, want ErrConflict", err)
	}
	if got, _, _ := b.ReadVersion(t.Context(), "c.bin"); string(got) != "other" {
		t.Fatalf("c.bin = %q, want the other writer's", got)
	}
	cur, err := b.Stat(t.Context(), "c.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(storage.PutOptions{IfMatch: cur.Fingerprint}); err != nil {
		t.Fatalf("replace of the current version: %v", err)
	}
}

// A server that breaks the connection in the middle of a streamed body,
// or refuses it (503, which the SDK cannot retry with a stream), fails
// the Put as unavailable and stores nothing.
func TestStreamedPutServerFailures(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	dst, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(dst); r.Out.Host = r.In.Host }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.ContentLength < 1<<20 {
			proxy.ServeHTTP(w, r)
			return
		}
		if _, err := io.CopyN(io.Discard, r.Body, 1<<20); err != nil {
			return
		}
		if strings.HasSuffix(r.URL.Path, "/refused.bin") {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>slow down</Message></Error>`)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // mid-body
		}
	}))
	t.Cleanup(srv.Close)
	b := newBackend(t, clientFor(srv.URL, fastRetries(3)), bucket, "", s3store.Options{})
	data := bytes.Repeat([]byte{'f'}, 12<<20)
	for _, p := range []string{"broken.bin", "refused.bin"} {
		_, err := b.Put(t.Context(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{SHA256: sha(data), SourceVerified: true, IfAbsent: true})
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s: Put error = %v, want ErrUnavailable", p, err)
		}
		wantNoObject(t, env.Backend(t, bucket, ""), p)
	}
}

// The catalog's compare-and-swap write is signed with the sha256 the
// backend takes for its metadata (the SDK does not hash it again).
func TestWriteIfVersionSignedWithItsSum(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b, seen := stageBackend(t, env, bucket, s3store.Options{})
	data := []byte(`{"catalog": true}`)
	if _, err := b.WriteIfVersion(t.Context(), "c.json", data, ""); err != nil {
		t.Fatal(err)
	}
	if s := seen(); len(s) != 1 || s[0] != "/"+bucket+"/c.json "+strings.TrimPrefix(sha(data), "sha256:") {
		t.Fatalf("requests with a body: %q, want one PutObject signed with the data's sha256", s)
	}
	if got, _, err := b.ReadVersion(t.Context(), "c.json"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored %q, %v", got, err)
	}
}

// A server that refuses a streamed conditional PUT while its body is still
// being sent (it answers 412 and closes the connection, which the client
// sees as a reset) fails the Put as a conflict, not as unavailable: a HEAD
// finds the condition no longer holds.
func TestStreamedPutRefusedMidBodyIsAConflict(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	dst, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(dst); r.Out.Host = r.In.Host }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.ContentLength < 1<<20 {
			proxy.ServeHTTP(w, r)
			return
		}
		if _, err := io.CopyN(io.Discard, r.Body, 1<<20); err != nil {
			return
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // mid-body, as a server that refused the condition
		}
	}))
	t.Cleanup(srv.Close)
	b := newBackend(t, clientFor(srv.URL, fastRetries(3)), bucket, "", s3store.Options{})
	direct := env.Backend(t, bucket, "")
	data := bytes.Repeat([]byte{'m'}, 12<<20)
	put := func(p string, opts storage.PutOptions) error {
		opts.SHA256, opts.SourceVerified = sha(data), true
		_, err := b.Put(t.Context(), p, bytes.NewReader(data), int64(len(data)), opts)
		return err
	}
	rawPut(t, env.Client, bucket, "taken.bin", "another writer's")
	if err := put("taken.bin", storage.PutOptions{IfAbsent: true}); !errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("create over another writer's object: %v, want ErrConflict", err)
	}
	before, err := direct.Stat(t.Context(), "taken.bin")
	if err != nil {
		t.Fatal(err)
	}
	rawPut(t, env.Client, bucket, "taken.bin", "changed again")
	if err := put("taken.bin", storage.PutOptions{IfMatch: before.Fingerprint}); !errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("replace of a changed object: %v, want ErrConflict", err)
	}
	cur, err := direct.Stat(t.Context(), "taken.bin")
	if err != nil {
		t.Fatal(err)
	}
	// The condition holds: the write was cut short, nothing else: unavailable.
	if err := put("taken.bin", storage.PutOptions{IfMatch: cur.Fingerprint}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("replace of the current version, cut short: %v, want ErrUnavailable", err)
	}
	if err := put("free.bin", storage.PutOptions{IfAbsent: true}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("create of a missing object, cut short: %v, want ErrUnavailable", err)
	}
	if got, _, _ := direct.ReadVersion(t.Context(), "taken.bin"); string(got) != "changed again" {
		t.Errorf("taken.bin = %q, want the other writer's", got)
	}
}
