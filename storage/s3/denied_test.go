package s3_test

import (
	"errors"
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

// TestAccessDeniedIsErrDenied: a bucket whose policy allows reads only
// (writes answered 403 AccessDenied, as S3 does) gives storage.ErrDenied
// naming the object and the fix; reads keep working.
func TestAccessDeniedIsErrDenied(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	if _, err := env.Backend(t, bucket, "site").Put(t.Context(), "a.txt", strings.NewReader("a\n"), 2, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the SigV4 signature covers Host
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
	}))
	t.Cleanup(srv.Close)
	b, err := s3store.NewFromClient(clientFor(srv.URL), bucket, "site", s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(t.Context(), "b.txt", strings.NewReader("b\n"), 2, storage.PutOptions{})
	want := "s3 put s3://" + bucket + "/site/b.txt: access denied: check the AWS credentials and the bucket policy: "
	if !errors.Is(err, storage.ErrDenied) || errors.Is(err, storage.ErrUnavailable) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("put into a read-only bucket: %v\nwant ErrDenied starting %q", err, want)
	}
	if _, err := b.Stat(t.Context(), "a.txt"); err != nil {
		t.Fatalf("stat in a read-only bucket: %v", err)
	}
}
