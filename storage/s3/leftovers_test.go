package s3_test

import (
	"bytes"
	"context"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
