package testenv

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
)

func TestNewS3(t *testing.T) {
	t.Parallel()
	s := NewS3(t)
	if want := os.Getenv(EnvS3Endpoint) != ""; s.External != want {
		t.Fatalf("External = %v, want %v", s.External, want)
	}
	if !strings.HasPrefix(s.URL, "http://") && !s.External {
		t.Fatalf("URL = %q, want plain http", s.URL)
	}
	b1, b2 := s.Bucket(t), s.Bucket(t)
	if b1 == b2 {
		t.Fatalf("two buckets share the name %q", b1)
	}

	// Bytes written through the backend are stored as is (no aws-chunked
	// framing) under the prefix, and only in their bucket.
	be := s.Backend(t, b1, "root")
	if got, want := be.String(), "s3://"+b1+"/root/"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	data := strings.Repeat("payload ", 1000)
	if _, err := be.Put(t.Context(), "a/b.txt", strings.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &b1, Key: aws.String("root/a/b.txt")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(got) != data {
		t.Fatalf("stored %d bytes, %v; want the %d bytes written", len(got), err, len(data))
	}
	if _, err := s.Backend(t, b2, "root").Stat(t.Context(), "a/b.txt"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat in the other bucket: %v, want ErrNotExist", err)
	}
}

// TestNewS3Isolated: two servers do not share buckets.
func TestNewS3Isolated(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvS3Endpoint) != "" {
		t.Skip("external endpoint: one server")
	}
	a, b := NewS3(t), NewS3(t)
	bucket := a.Bucket(t)
	if _, err := b.Client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: &bucket}); err == nil {
		t.Fatalf("bucket %s of one server is visible on another", bucket)
	}
}
