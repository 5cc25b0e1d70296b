package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distributor/distributor/storage"
)

// ServerTime is the server's clock: the Date header of its answer to a
// HeadBucket (whole seconds).
func (b *Backend) ServerTime(ctx context.Context) (time.Time, error) {
	out, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket})
	if err != nil {
		return time.Time{}, b.wrap("head bucket", "", err)
	}
	raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response)
	if !ok {
		return time.Time{}, errors.New("the SDK kept no raw response to read the Date header from")
	}
	date := raw.Header.Get("Date")
	t, err := http.ParseTime(date)
	if err != nil {
		return time.Time{}, fmt.Errorf("the server's Date header %q: %w", date, err)
	}
	return t, nil
}

// CheckAbortedUpload starts a multipart upload of p, uploads one part,
// aborts it once and reports what the server still keeps: the upload
// (ListParts), or an object at p.
func (b *Backend) CheckAbortedUpload(ctx context.Context, p string) error {
	key, err := b.key(p)
	if err != nil {
		return err
	}
	created, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return b.wrap("start upload", key, err)
	}
	id := aws.ToString(created.UploadId)
	defer func() { _ = b.abort(ctx, key, id) }() // whatever the check found
	part := []byte("part of an upload distributor doctor aborts")
	if _, err := b.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &b.bucket, Key: &key, UploadId: &id,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part)))}); err != nil {
		return b.wrap("upload part 1", key, err)
	}
	if _, err := b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: &id}); err != nil {
		return b.wrap("abort multipart upload "+id+" to", key, err)
	}
	gone, err := b.uploadGone(ctx, key, id)
	switch {
	case err != nil:
		return b.wrap("list parts of aborted upload "+id+" to", key, err)
	case !gone:
		return fmt.Errorf("s3://%s/%s: upload %s still lists its parts after the abort", b.bucket, key, id)
	}
	if _, err := b.head(ctx, "head", key); !errors.Is(err, storage.ErrNotExist) {
		return fmt.Errorf("s3://%s/%s: an object is there after the upload's abort (%v)", b.bucket, key, err)
	}
	return nil
}
