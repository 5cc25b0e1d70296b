package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/testenv"
)

func setCreds(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
}

func keys(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, *o.Key)
	}
	slices.Sort(ks)
	return ks
}

func TestBucketsCreatesMissingAndKeepsExisting(t *testing.T) {
	setCreds(t)
	s := testenv.NewS3(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"--endpoint", s.URL, "buckets", "reports", "bundles"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "bucket reports: created\nbucket bundles: created\n"; got != want {
		t.Errorf("first run printed %q, want %q", got, want)
	}
	out.Reset()
	if err := run(ctx, []string{"--endpoint", s.URL, "buckets", "reports"}, &out); err != nil {
		t.Fatalf("second run over an existing bucket: %v", err)
	}
	if got, want := out.String(), "bucket reports: exists\n"; got != want {
		t.Errorf("second run printed %q, want %q", got, want)
	}
}

func TestBucketsGivesUpOnASilentEndpoint(t *testing.T) {
	setCreds(t)
	err := run(context.Background(), []string{"--endpoint", "http://127.0.0.1:1", "--wait", "1s", "buckets", "b"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "S3 endpoint http://127.0.0.1:1 did not answer within 1s") {
		t.Fatalf("err = %v, want the endpoint named", err)
	}
}

func TestBundleUploadsTheFolderUnderItsName(t *testing.T) {
	setCreds(t)
	s := testenv.NewS3(t)
	ctx := context.Background()
	root := t.TempDir()
	for name, body := range map[string]string{"run-1/manifest.json": "{}", "run-1/report.md": "# x", "run-1/data/a.csv": "a", "other/x": "x"} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(ctx, []string{"--endpoint", s.URL, "--wait", "10s", "buckets", "bundles"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"--endpoint", s.URL, "--from", root, "bundle", "run-1"}, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"run-1/data/a.csv", "run-1/manifest.json", "run-1/report.md"}
	if got := keys(t, s.Client, "bundles"); !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
	if got, want := out.String(), "uploaded 3 file(s) from "+filepath.Join(root, "run-1")+" to s3://bundles/run-1/\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	// upload with an explicit prefix, no trailing slash given.
	if err := run(ctx, []string{"--endpoint", s.URL, "upload", filepath.Join(root, "other"), "s3://bundles/copies/o"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, s.Client, "bundles"); !slices.Contains(got, "copies/o/x") {
		t.Errorf("keys = %q, want copies/o/x among them", got)
	}
}

func TestBadArguments(t *testing.T) {
	setCreds(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command: use buckets, upload or bundle"},
		{[]string{"bundle", "../etc"}, `bundle name "../etc": give the name of one folder under /bundles, e.g. run-1`},
		{[]string{"upload", "d", "bundles/x"}, `"bundles/x" is not an s3://BUCKET/PREFIX/ URL`},
		{[]string{"buckets"}, `"buckets" with 0 argument(s): use buckets NAME..., upload DIR s3://BUCKET/PREFIX/ or bundle NAME`},
	} {
		err := run(ctx, tc.args, &bytes.Buffer{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("run(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
	dir := t.TempDir()
	err := run(ctx, []string{"--endpoint", "http://127.0.0.1:1", "upload", dir, "s3://b/p/"}, &bytes.Buffer{})
	if err == nil || err.Error() != dir+" holds no files: create the bundle there first (distributor bundle create)" {
		t.Errorf("empty folder: %v", err)
	}
}
