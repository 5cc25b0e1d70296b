// Command s3init prepares the S3 gateway of the compose stack without the
// aws-cli image: it waits for the endpoint, creates buckets, and uploads
// bundle folders. deploy/compose.local.yml runs it where public images
// cannot be pulled; it works against any S3 endpoint.
//
//	s3init buckets reports bundles        # wait for the endpoint, create both (existing ones are fine)
//	s3init upload DIR s3://bucket/prefix/ # every file under DIR, keys relative to DIR
//	s3init bundle run-1                   # /bundles/run-1 to s3://bundles/run-1/
//
// The endpoint comes from S3_ENDPOINT (default http://s3:7070), credentials
// and region from the standard AWS variables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3init: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("s3init", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	endpoint := fl.String("endpoint", envOr("S3_ENDPOINT", "http://s3:7070"), "S3 endpoint URL")
	wait := fl.Duration("wait", time.Minute, "how long buckets waits for the endpoint to answer")
	from := fl.String("from", "/bundles", "folder holding the bundle folders (bundle)")
	bucket := fl.String("bucket", "bundles", "bucket that receives bundles (bundle)")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("%w (usage: s3init [--endpoint URL] buckets NAME... | upload DIR s3://BUCKET/PREFIX/ | bundle NAME)", err)
	}
	argv := fl.Args()
	if len(argv) == 0 {
		return errors.New("no command: use buckets, upload or bundle")
	}
	client, err := newClient(ctx, *endpoint)
	if err != nil {
		return err
	}
	switch cmd, rest := argv[0], argv[1:]; {
	case cmd == "buckets" && len(rest) > 0:
		if err := waitReady(ctx, client, *endpoint, *wait); err != nil {
			return err
		}
		for _, b := range rest {
			created, err := ensureBucket(ctx, client, b)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "bucket %s: %s\n", b, map[bool]string{true: "created", false: "exists"}[created])
		}
		return nil
	case cmd == "upload" && len(rest) == 2:
		b, prefix, err := parseS3URL(rest[1])
		if err != nil {
			return err
		}
		return upload(ctx, client, stdout, rest[0], b, prefix)
	case cmd == "bundle" && len(rest) == 1:
		name := rest[0]
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return fmt.Errorf("bundle name %q: give the name of one folder under %s, e.g. run-1", name, *from)
		}
		return upload(ctx, client, stdout, filepath.Join(*from, name), *bucket, name+"/")
	default:
		return fmt.Errorf("%q with %d argument(s): use buckets NAME..., upload DIR s3://BUCKET/PREFIX/ or bundle NAME", cmd, len(rest))
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newClient(ctx context.Context, endpoint string) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(envOr("AWS_REGION", "us-east-1")))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)

		// S3-compatible gateways answer on one host name.
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// waitReady polls until the endpoint lists buckets: the gateway container
// starts listening a moment after it starts.
func waitReady(ctx context.Context, c *s3.Client, endpoint string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		_, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("S3 endpoint %s did not answer within %s: %w", endpoint, wait, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ensureBucket creates bucket unless it exists; it reports whether it did.
func ensureBucket(ctx context.Context, c *s3.Client, bucket string) (bool, error) {
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); err == nil {
		return false, nil
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return true, nil
}

func parseS3URL(u string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("%q is not an s3://BUCKET/PREFIX/ URL", u)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// upload puts every regular file under dir at prefix + its slash-separated
// path relative to dir.
func upload(ctx context.Context, c *s3.Client, stdout io.Writer, dir, bucket, prefix string) error {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		key := path.Join(prefix, filepath.ToSlash(rel))

		// *os.File is seekable: the SDK signs the body without buffering it.
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: f}); err != nil {
			return fmt.Errorf("upload %s to s3://%s/%s: %w", p, bucket, key, err)
		}
		n++
		return nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s holds no files: create the bundle there first (distributor bundle create)", dir)
	}
	fmt.Fprintf(stdout, "uploaded %d file(s) from %s to s3://%s/%s\n", n, dir, bucket, prefix)
	return nil
}
