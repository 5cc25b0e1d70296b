package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv/fakes3"
)

// Environment variables that point the S3 tests at an external server
// (versitygw, AWS, …) instead of the in-process one.
const (
	EnvS3Endpoint  = "DISTRIBUTOR_TEST_S3_ENDPOINT"
	EnvS3AccessKey = "DISTRIBUTOR_TEST_S3_ACCESS_KEY"
	EnvS3SecretKey = "DISTRIBUTOR_TEST_S3_SECRET_KEY"
	EnvS3Region    = "DISTRIBUTOR_TEST_S3_REGION"
)

// S3 is an S3 endpoint for tests with a client configured for it.
type S3 struct {
	// URL is the endpoint (http://127.0.0.1:port for the in-process server).
	URL string

	// Client talks to URL: static credentials, path style, checksums only
	// when required.
	Client *s3.Client

	// External is true when URL came from DISTRIBUTOR_TEST_S3_ENDPOINT.
	External bool
}

// NewS3 starts an in-process gofakes3 server (memory backend, plain http,
// listings encoded by package fakes3;
// gofakes3 over https stores the SDK's aws-chunked framing as the body), or
// uses the endpoint in DISTRIBUTOR_TEST_S3_ENDPOINT when set. The server
// stops when the test ends.
func NewS3(t testing.TB) *S3 {
	t.Helper()
	s := &S3{}
	access, secret, region := "test", "test", "us-east-1"
	if ep := os.Getenv(EnvS3Endpoint); ep != "" {
		s.URL, s.External = ep, true
		access, secret = os.Getenv(EnvS3AccessKey), os.Getenv(EnvS3SecretKey)
		if r := os.Getenv(EnvS3Region); r != "" {
			region = r
		}
	} else {
		srv := httptest.NewUnstartedServer(fakes3.New())

		// gofakes3 writes headers twice on requests the client abandoned.
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.Start()
		t.Cleanup(srv.Close)
		s.URL = srv.URL
	}

	// A hand-built config, so nothing leaks in from ~/.aws or AWS_* variables.
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
	}
	s.Client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.URL)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return s
}

// Bucket creates a fresh, uniquely named bucket. On an external endpoint it
// is emptied and deleted when the test ends.
func (s *S3) Bucket(t testing.TB) string {
	t.Helper()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "distributor-test-" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create test bucket %s at %s: %v", name, s.URL, err)
	}
	if s.External {
		t.Cleanup(func() { s.removeBucket(t, name) })
	}
	return name
}

// removeBucket empties and deletes a bucket, aborting unfinished uploads.
func (s *S3) removeBucket(t testing.TB, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uploads, err := s.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err == nil {
		for _, u := range uploads.Uploads {
			_, _ = s.Client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId})
		}
	}
	pages := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Errorf("clean up test bucket %s: %v", bucket, err)
			return
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := s.Client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			t.Errorf("clean up test bucket %s: %v", bucket, err)
			return
		}
	}
	if _, err := s.Client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket}); err != nil {
		t.Errorf("delete test bucket %s: %v", bucket, err)
	}
}

// Backend returns a storage/s3 backend on bucket and prefix.
func (s *S3) Backend(t testing.TB, bucket, prefix string) storage.Backend {
	t.Helper()
	b, err := s3store.NewFromClient(s.Client, bucket, prefix, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Requests records the HTTP requests of a client, one line each: the
// method, "LIST" for a listing (with " after=KEY" for its start-after),
// the key (without bucket), and
// " if-match"/" if-none-match" for a conditional request.
type Requests struct {
	mu    sync.Mutex
	lines []string
}

// Lines returns the requests recorded since the last Reset, in order.
func (r *Requests) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// Reset forgets the requests recorded so far.
func (r *Requests) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = nil
}

func (r *Requests) record(req *http.Request, bucket string) {
	key := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, "/"+bucket), "/")
	q := req.URL.Query()
	line := req.Method + " " + key
	switch {
	case req.Method == http.MethodGet && q.Has("list-type"):
		line = "LIST " + q.Get("prefix")
		if a := q.Get("start-after"); a != "" {
			line += " after=" + a
		}
	case req.Method == http.MethodPost && q.Has("delete"):
		line = "DELETE-BATCH"
	}
	if req.Header.Get("If-Match") != "" {
		line += " if-match"
	}
	if req.Header.Get("If-None-Match") != "" {
		line += " if-none-match"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
}

// countingClient records every request it sends.
type countingClient struct {
	inner  s3.HTTPClient
	bucket string
	reqs   *Requests
}

func (c countingClient) Do(req *http.Request) (*http.Response, error) {
	c.reqs.record(req, c.bucket)
	return c.inner.Do(req)
}

// CountedBackend is Backend through a client of its own that records every
// HTTP request it sends (retries included): what a publication costs on
// S3, counted below the SDK.
func (s *S3) CountedBackend(t testing.TB, bucket, prefix string) (storage.Backend, *Requests) {
	t.Helper()
	reqs := &Requests{}
	client := s3.New(s.Client.Options(), func(o *s3.Options) {
		o.HTTPClient = countingClient{inner: o.HTTPClient, bucket: bucket, reqs: reqs}
	})
	b, err := s3store.NewFromClient(client, bucket, prefix, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, reqs
}

// UseStandardChain points the AWS SDK's standard credential chain at this
// server's credentials only (no profile, no shared files, no instance
// metadata), for tests of code that opens S3 the production way. It sets
// environment variables, so the test must not be parallel.
func (s *S3) UseStandardChain(t testing.TB) {
	t.Helper()
	access, secret := "test", "test"
	if s.External {
		access, secret = os.Getenv(EnvS3AccessKey), os.Getenv(EnvS3SecretKey)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if os.Getenv("AWS_CA_BUNDLE") == "" {
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
			t.Setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
		}
	}
}
