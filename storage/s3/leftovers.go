package s3

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// Leftovers lists the unfinished multipart uploads under the root's prefix
// started before cutoff: a Put killed mid-upload leaves its parts stored
// (and billed) until the upload is aborted. Each one's Size is the sum of
// its uploaded parts. Uploads to keys that are not valid paths are not
// distributor's and are left out; with an empty prefix (the root is the
// whole bucket) every other upload in the bucket counts.
func (b *Backend) Leftovers(ctx context.Context, cutoff time.Time) ([]storage.Leftover, error) {
	var out []storage.Leftover
	pages := s3.NewListMultipartUploadsPaginator(b.client, &s3.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: aws.String(b.prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)

		// gofakes3 answers NoSuchUpload for a bucket that never had an
		// upload; S3 lists nothing.
		if apiCode(err) == "NoSuchUpload" {
			break
		}
		if err != nil {
			return nil, b.wrap("list multipart uploads", b.prefix, err)
		}
		for _, u := range page.Uploads {
			p, ok := strings.CutPrefix(aws.ToString(u.Key), b.prefix)
			started := aws.ToTime(u.Initiated)
			if !ok || catalog.ValidatePath(p) != nil || !started.Before(cutoff) {
				continue
			}
			size, err := b.uploadedBytes(ctx, aws.ToString(u.Key), aws.ToString(u.UploadId))
			if err != nil {
				return nil, err
			}
			out = append(out, storage.Leftover{Path: p, Size: size, ModTime: started, ID: aws.ToString(u.UploadId)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// uploadedBytes sums the parts of an unfinished upload; one aborted since
// it was listed has none.
func (b *Backend) uploadedBytes(ctx context.Context, key, id string) (int64, error) {
	var n int64
	pages := s3.NewListPartsPaginator(b.client, &s3.ListPartsInput{Bucket: &b.bucket, Key: &key, UploadId: &id})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if apiCode(err) == "NoSuchUpload" {
			return 0, nil
		}
		if err != nil {
			return 0, b.wrap("list parts of upload "+id+" to", key, err)
		}
		for _, part := range page.Parts {
			n += aws.ToInt64(part.Size)
		}
	}
	return n, nil
}

// RemoveLeftovers aborts the uploads, which frees their parts. An upload
// already finished or aborted is not an error.
func (b *Backend) RemoveLeftovers(ctx context.Context, ls []storage.Leftover) error {
	var errs []error
	for _, l := range ls {
		if l.ID == "" {
			return fmt.Errorf("remove leftover %q in %s: no upload ID: pass what Leftovers returned", l.Path, b)
		}
		key, err := b.key(l.Path)
		if err != nil {
			return err
		}
		_, err = b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: aws.String(l.ID)})
		if err != nil && httpStatus(err) != 404 && apiCode(err) != "NoSuchUpload" {
			errs = append(errs, b.wrap("abort multipart upload "+l.ID+" to", key, err))
		}
	}
	return errors.Join(errs...)
}
