package engine_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// holdCatalogPut holds the catalog's PUT, once armed, until a fingerprint
// shard's PUT has been answered (or for a long while, then says so): a
// publication that writes its shards only after its commit would wait.
type holdCatalogPut struct {
	inner s3.HTTPClient
	armed atomic.Bool
	once  sync.Once
	shard chan struct{}
	mu    sync.Mutex
	order []string
}

func (h *holdCatalogPut) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.order = append(h.order, s)
}

func (h *holdCatalogPut) Do(req *http.Request) (*http.Response, error) {
	isPut := h.armed.Load() && req.Method == http.MethodPut
	if isPut && strings.HasSuffix(req.URL.Path, "/"+catalog.FileName) {
		select {
		case <-h.shard:
			h.note("catalog PUT sent")
		case <-time.After(20 * time.Second):
			h.note("catalog PUT sent with no shard written beside it")
		}
	}
	resp, err := h.inner.Do(req)
	if isPut && err == nil && strings.Contains(req.URL.Path, "/.distributor/fingerprints/") {
		h.once.Do(func() {
			h.note("shard PUT answered")
			close(h.shard)
		})
	}
	return resp, err
}

// On S3 the fingerprint shards of a republish are written while the
// catalog's compare-and-swap is in flight, not after it: the shard's PUT
// is answered while the catalog's is held, and the republish completes
// with the shard recording every written path.
func TestS3ShardsAreWrittenBesideTheCatalogCommit(t *testing.T) {
	t.Parallel()
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	hold := &holdCatalogPut{shard: make(chan struct{})}
	client := s3.New(srv.Client.Options(), func(o *s3.Options) {
		hold.inner = o.HTTPClient
		o.HTTPClient = hold
	})
	root, err := s3store.NewFromClient(client, bucket, s3Prefix, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	base := config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
		Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("d/f%02d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", files)
	files["d/f07.txt"], files["d/f31.txt"] = "changed 7\n", "changed 31\n"
	dir, _ := makeBundle(t, "weatherreporter.today", files)
	hold.armed.Store(true)
	res, err := h.Publish(t2, pipeA, "archive", dir)
	if err != nil {
		t.Fatal(err)
	}
	wantStrings(t, "written", sortedPaths(res.Written), []string{"d/f07.txt", "d/f31.txt"})
	hold.mu.Lock()
	order := hold.order
	hold.mu.Unlock()
	wantStrings(t, "order", order, []string{"shard PUT answered", "catalog PUT sent"})
	shard := s3Prefix + engine.FingerprintsFile("d/f07.txt", engine.FingerprintShards(len(files)))
	out, err := srv.Client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(shard)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	for p := range files {
		if !strings.Contains(string(body), "\t"+p+"\n") {
			t.Errorf("shard %s has no entry for %s:\n%s", shard, p, body)
		}
	}
	// The written versions, by their ETags.
	for _, p := range []string{"d/f07.txt", "d/f31.txt"} {
		head, err := srv.Client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String(s3Prefix + p)})
		if err != nil {
			t.Fatal(err)
		}
		if line := "\t" + aws.ToString(head.ETag) + "\t" + p + "\n"; !strings.Contains(string(body), line) {
			t.Errorf("shard %s lacks %q:\n%s", shard, line, body)
		}
	}
}
