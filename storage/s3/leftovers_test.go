package s3_test

import (
	"bytes"
	"context"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/storage/storagetest"
	"github.com/distributor/distributor/testenv"
)

// startUpload leaves what a Put killed mid-upload leaves: a multipart
// upload with one part stored and never completed.
func startUpload(t *testing.T, client *s3.Client, bucket, key string, partSize int64) {
	t.Helper()
	up, err := client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.UploadPart(t.Context(), &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, partSize)), ContentLength: aws.Int64(partSize)})
	if err != nil {
		t.Fatal(err)
	}
}

func openUploads(t *testing.T, client *s3.Client, bucket string) []string {
	t.Helper()
	out, err := client.ListMultipartUploads(context.Background(), // t.Context() is done in cleanups
		&s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	sort.Strings(keys)
	return keys
}

// TestLeftoverContract runs the leftover contract on a prefixed root whose
// bucket also holds unfinished uploads outside the prefix: they are never
// listed nor aborted.
func TestLeftoverContract(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	var bucket string
	neighbours := []string{"dest/root-sibling", "dest/rootx/y", "other/root/z"}
	storagetest.RunLeftovers(t, func(t *testing.T) storage.Backend {
		bucket = env.Bucket(t)
		for _, k := range neighbours {
			startUpload(t, env.Client, bucket, k, 1000)
		}
		t.Cleanup(func() {
			if got := openUploads(t, env.Client, bucket); len(got) != len(neighbours) {
				t.Errorf("uploads outside the prefix: %q, want %q kept", got, neighbours)
			}
		})
		b, err := s3store.NewFromClient(env.Client, bucket, "dest/root", s3store.Options{PartSize: 5 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, func(t *testing.T, _ storage.Backend, p string, size int64) {
		startUpload(t, env.Client, bucket, "dest/root/"+p, size/2)
	})
}
