package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// headerClient records the x-amz-content-sha256 of every request with a body.
type headerClient struct {
	inner s3.HTTPClient
	mu    *sync.Mutex
	seen  *[]string
}

func (c headerClient) Do(req *http.Request) (*http.Response, error) {
	if req.ContentLength > 0 && req.Method == http.MethodPut {
		c.mu.Lock()
		*c.seen = append(*c.seen, req.URL.Path+" "+req.Header.Get("X-Amz-Content-Sha256"))
		c.mu.Unlock()
	}
	return c.inner.Do(req)
}

// stageBackend is a backend on env whose client records payload hashes.
func stageBackend(t *testing.T, env *testenv.S3, bucket string, opts s3store.Options) (*s3store.Backend, func() []string) {
	var mu sync.Mutex
	var seen []string
	client := s3.New(env.Client.Options(), func(o *s3.Options) {
		o.HTTPClient = headerClient{inner: o.HTTPClient, mu: &mu, seen: &seen}
	})
	return newBackend(t, client, bucket, "", opts), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A large staged object is one streamed part of a multipart upload: it
// stays invisible until Commit, is signed with its own sha256 (the client
// hashes nothing more), and leaves no upload behind.
// multipartStaged: objects over one 5 MiB part are staged as multipart
// uploads (no single PutObject), so that tests reach that path with a few MB.
var multipartStaged = s3store.Options{PartSize: 5 << 20, SinglePutMax: -1}

func TestStageLargeObject(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b, seen := stageBackend(t, env, bucket, multipartStaged)
	data := bytes.Repeat([]byte("large staged object\n"), 300_000) // 6 MB: over a part
	digest := sha(data)
	st := b.Stage(t.Context())
	defer st.Close()
	oi, err := st.Put(t.Context(), "big/a.bin", readerSource(bytes.NewReader(data)), int64(len(data)), storage.PutOptions{SHA256: digest, IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if oi.Size != int64(len(data)) || oi.Fingerprint != "" {
		t.Fatalf("staged Put info = %+v, want the size and no fingerprint (known at commit)", oi)
	}
	wantNoObject(t, b, "big/a.bin")
	ci, err := st.Commit(t.Context(), "big/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if ci.Fingerprint == "" || ci.SHA256 != digest {
		t.Fatalf("CommitInfo = %+v, want an ETag and the digest", ci)
	}
	got, _, err := b.ReadVersion(t.Context(), "big/a.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("committed object: %d bytes, %v; want the %d staged", len(got), err, len(data))
	}
	if si, err := b.Stat(t.Context(), "big/a.bin"); err != nil || si.SHA256 != digest {
		t.Fatalf("Stat = %+v, %v; want the sha256 metadata %s", si, err, digest)
	}
	wantNoUploads(t, env.Client, bucket)
	// Two parts (5 MiB and the rest), each signed with its own sha256.
	var want []string
	for _, part := range [][]byte{data[:5<<20], data[5<<20:]} {
		want = append(want, "/"+bucket+"/big/a.bin "+strings.TrimPrefix(sha(part), "sha256:"))
	}
	s := seen()
	slices.Sort(s)
	slices.Sort(want)
	if !slices.Equal(s, want) {
		t.Fatalf("requests with a body: %q, want the two parts signed with their sha256 %q", s, want)
	}
}

// A small staged object is sent at Commit in one PutObject, signed with
// its sha256.
func TestStageSmallObjectIsOneRequest(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b, seen := stageBackend(t, env, bucket, s3store.Options{})
	st := b.Stage(t.Context())
	defer st.Close()
	data := []byte("small")
	if _, err := st.Put(t.Context(), "s.txt", readerSource(bytes.NewReader(data)), 5, storage.PutOptions{SHA256: sha(data), SourceVerified: true}); err != nil {
		t.Fatal(err)
	}
	if s := seen(); len(s) != 0 {
		t.Fatalf("requests before Commit: %q, want none", s)
	}
	if _, err := st.Commit(t.Context(), "s.txt"); err != nil {
		t.Fatal(err)
	}
	if s := seen(); len(s) != 1 || !strings.HasSuffix(s[0], " "+strings.TrimPrefix(sha(data), "sha256:")) {
		t.Fatalf("requests with a body: %q, want one PutObject signed with the object's sha256", s)
	}
}

// Conditions of a large staged object are checked at Commit; a refused
// or discarded one leaves no upload.
func TestStageLargeConditionsAndClose(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", multipartStaged)
	data := bytes.Repeat([]byte{'x'}, 6<<20)
	v1, err := b.Put(t.Context(), "m.bin", strings.NewReader("v1"), 2, storage.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := b.Stage(t.Context())
	for _, c := range []struct {
		path string
		opts storage.PutOptions
	}{
		{"n.bin", storage.PutOptions{IfAbsent: true}},
		{"m.bin", storage.PutOptions{IfMatch: v1.Fingerprint}},
		{"gone.bin", storage.PutOptions{IfMatch: v1.Fingerprint}},
		{"discarded.bin", storage.PutOptions{IfAbsent: true}},
	} {
		c.opts.SHA256 = sha(data)
		if _, err := st.Put(t.Context(), c.path, readerSource(bytes.NewReader(data)), int64(len(data)), c.opts); err != nil {
			t.Fatal(err)
		}
	}
	rawPut(t, env.Client, bucket, "n.bin", "other")
	rawPut(t, env.Client, bucket, "m.bin", "v2-other")
	for _, p := range []string{"n.bin", "m.bin", "gone.bin"} {
		if _, err := st.Commit(t.Context(), p); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("Commit %s after another writer: err = %v, want ErrConflict", p, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wantNoUploads(t, env.Client, bucket)
	for p, want := range map[string]string{"n.bin": "other", "m.bin": "v2-other"} {
		if got, _, _ := b.ReadVersion(t.Context(), p); string(got) != want {
			t.Fatalf("%s = %q, want %q", p, got, want)
		}
	}
	wantNoObject(t, b, "gone.bin")
	wantNoObject(t, b, "discarded.bin")
}

// Bytes that are not the announced ones fail the staged Put, large or
// small, and leave nothing: no object, no upload.
func TestStageChecksContent(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", multipartStaged)
	for _, n := range []int{1000, 3 << 20, 6 << 20} {
		data := bytes.Repeat([]byte{'d'}, n)
		st := b.Stage(t.Context())
		for _, c := range []struct {
			name, want string
			size       int64
			digest     string
		}{
			{"short", "announced", int64(n) + 1, sha(data)},
			{"long", "more than", int64(n) - 1, sha(data)},
			{"digest", "does not match", int64(n), sha([]byte("other"))},
		} {
			_, err := st.Put(t.Context(), c.name, readerSource(io.MultiReader(bytes.NewReader(data))), c.size, storage.PutOptions{SHA256: c.digest})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%d bytes, %s: staged Put error = %v, want one containing %q", n, c.name, err, c.want)
			}
			if _, err := st.Commit(t.Context(), c.name); err == nil {
				t.Errorf("%d bytes, %s: Commit of a failed Put succeeded", n, c.name)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wantNoUploads(t, env.Client, bucket)
	var keys []string
	if err := b.List(t.Context(), "", func(oi storage.ObjectInfo) error { keys = append(keys, oi.Path); return nil }); err != nil || len(keys) != 0 {
		t.Fatalf("objects after failed staged Puts: %q, %v; want none", keys, err)
	}
}

// Once the memory for small staged objects (MemoryBudget/4) is used up, a
// small object is read and checked but not kept: its Commit reads the
// source again. Memory is given back at Commit and Close.
func TestStageMemoryShare(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", s3store.Options{PartSize: 5 << 20, MemoryBudget: 20 << 20}) // share: 5 MiB
	data := bytes.Repeat([]byte{'s'}, 1<<20)
	opens := map[string]int{}
	source := func(p string) storage.Source {
		return func(context.Context) (io.ReadCloser, error) {
			opens[p]++
			return io.NopCloser(bytes.NewReader(data)), nil
		}
	}
	reopened := func(paths ...string) (again []string) {
		for _, p := range paths {
			if opens[p] > 1 {
				again = append(again, p)
			}
		}
		return again
	}
	st := b.Stage(t.Context())
	defer st.Close()
	paths := []string{"a", "b", "c", "d", "e", "f"}
	for _, p := range paths {
		r := &countReader{r: bytes.NewReader(data)}
		if _, err := st.Put(t.Context(), p, readerSource(r), int64(len(data)), storage.PutOptions{SHA256: sha(data)}); err != nil {
			t.Fatal(err)
		}
		if r.n != int64(len(data)) {
			t.Fatalf("staged Put of %s read %d bytes, want all %d", p, r.n, len(data))
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = b.Stage(t.Context())
	defer st.Close()
	for _, p := range paths {
		if _, err := st.Put(t.Context(), p, source(p), int64(len(data)), storage.PutOptions{SHA256: sha(data)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Commit(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), "g", source("g"), int64(len(data)), storage.PutOptions{SHA256: sha(data)}); err != nil {
		t.Fatalf("staged Put after a Commit gave memory back: %v", err)
	}
	for _, p := range append(paths[1:], "g") {
		if _, err := st.Commit(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if again := reopened(append(paths, "g")...); len(again) != 1 || again[0] != "f" {
		t.Fatalf("sources read again at Commit: %q; want the one past the 5 MiB share (f)", again)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := b.Stage(t.Context())
	defer st2.Close()
	next := []string{"h", "i", "j", "k", "l"}
	for _, p := range next {
		if _, err := st2.Put(t.Context(), p, source(p), int64(len(data)), storage.PutOptions{SHA256: sha(data)}); err != nil {
			t.Fatalf("staged Put %s after Close gave memory back: %v", p, err)
		}
		if _, err := st2.Commit(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if again := reopened(next...); len(again) != 0 {
		t.Fatalf("after Close gave memory back, sources read again: %q; want none", again)
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
