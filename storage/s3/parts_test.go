package s3_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// partFaultServer proxies to target, but the upload of part 2 fails with
// a 500 (the first n times; n < 0: always), or, with hang, never answers
// until the client gives up.
func partFaultServer(t *testing.T, target string, n int32, hang bool) (endpoint string, faults *atomic.Int32) {
	t.Helper()
	dst, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	faults = new(atomic.Int32)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(dst); r.Out.Host = r.In.Host }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Query().Get("partNumber") != "2" || (n >= 0 && faults.Load() >= n) {
			proxy.ServeHTTP(w, r)
			return
		}
		faults.Add(1)
		io.Copy(io.Discard, r.Body) // then the server notices the client leave
		if hang {
			<-r.Context().Done() // the client's timeout closes the connection
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>part lost</Message></Error>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, faults
}

// A large staged object goes as parts from buffers, so a part that fails
// once is resent and the object lands whole; a part that keeps failing,
// or a server that stops answering a part, fails the Put within the
// timeouts, and the upload is aborted: nothing visible, no parts left.
func TestStagedPartsFaults(t *testing.T) {
	env := testenv.NewS3(t)
	env.UseStandardChain(t)
	data := bytes.Repeat([]byte("parts of a large object\n"), (16<<20)/24) // 4 parts of 5 MiB
	digest := sha(data)
	const limit = 300 * time.Millisecond
	for _, c := range []struct {
		name   string
		n      int32
		hang   bool
		wantOK bool
	}{
		{"fails once", 1, false, true},
		{"keeps failing", -1, false, false},
		{"hangs", -1, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket := env.Bucket(t)
			endpoint, faults := partFaultServer(t, env.URL, c.n, c.hang)
			opts := s3store.Options{Bucket: bucket, Endpoint: endpoint, Region: os.Getenv(testenv.EnvS3Region),
				PartSize: 5 << 20, SinglePutMax: -1, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}
			if c.hang { // tight limits only where the server hangs: a loaded machine is slow
				opts.Timeouts = s3store.Timeouts{Connect: limit, FirstByte: limit, Idle: limit}
			}
			b, err := s3store.New(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			st := b.Stage(t.Context())
			defer st.Close()
			start := time.Now()
			_, err = st.Put(t.Context(), "big.bin", readerSource(bytes.NewReader(data)), int64(len(data)), storage.PutOptions{SHA256: digest, SourceVerified: true, IfAbsent: true})
			took := time.Since(start)
			if faults.Load() == 0 {
				t.Fatal("no part upload met the fault")
			}
			if !c.wantOK {
				if !errors.Is(err, storage.ErrUnavailable) {
					t.Fatalf("staged Put error = %v, want ErrUnavailable", err)
				}
				if took > 2*limit+5*time.Second {
					t.Fatalf("staged Put took %v", took)
				}
				t.Logf("%v after %v", err, took.Round(time.Millisecond))
				wantNoUploads(t, env.Client, bucket)
				wantNoObject(t, env.Backend(t, bucket, ""), "big.bin")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantNoObject(t, b, "big.bin")
			if _, err := st.Commit(t.Context(), "big.bin"); err != nil {
				t.Fatal(err)
			}
			got, _, err := b.ReadVersion(t.Context(), "big.bin")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes, %v; want the %d staged", len(got), err, len(data))
			}
			wantNoUploads(t, env.Client, bucket)
		})
	}
}

// A source whose bytes are not the object's fails the last part before it
// is sent, and the upload is aborted.
func TestStagedPartsCheckTheSource(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", multipartStaged)
	data := bytes.Repeat([]byte{'p'}, 12<<20)
	errDamaged := errors.New("bundle file damaged")
	st := b.Stage(t.Context())
	defer st.Close()
	for name, r := range map[string]io.Reader{
		"fails at its end": &endErrReader{bytes.NewReader(data), errDamaged},
		"short":            bytes.NewReader(data[:11<<20]),
		"long":             io.MultiReader(bytes.NewReader(data), strings.NewReader("x")),
	} {
		_, err := st.Put(t.Context(), "p.bin", readerSource(r), int64(len(data)), storage.PutOptions{SHA256: sha(data), SourceVerified: true})
		if err == nil {
			t.Fatalf("%s: staged Put error = %v, want the source's failure", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	wantNoUploads(t, env.Client, bucket)
	wantNoObject(t, b, "p.bin")
}

// An upload that is still there after its abort (a part the server was
// still receiving landed after it) is aborted again until ListParts no
// longer finds it: no upload is left behind.
func TestAbortRepeatsUntilTheUploadIsGone(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	dst, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	var swallowed atomic.Int32
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(dst); r.Out.Host = r.In.Host }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") && swallowed.Add(1) == 1 {
			w.WriteHeader(http.StatusNoContent) // answered, but the upload lives on
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b := newBackend(t, clientFor(srv.URL), bucket, "", multipartStaged)
	data := bytes.Repeat([]byte{'a'}, 12<<20)
	st := b.Stage(t.Context())
	defer st.Close()
	_, err = st.Put(t.Context(), "a.bin", readerSource(bytes.NewReader(data[:11<<20])), int64(len(data)), storage.PutOptions{SHA256: sha(data), SourceVerified: true})
	if err == nil {
		t.Fatal("staged Put of a short source succeeded")
	}
	if n := swallowed.Load(); n < 2 {
		t.Fatalf("%d aborts sent, want a second one after the first left the upload", n)
	}
	wantNoUploads(t, env.Client, bucket)
}
