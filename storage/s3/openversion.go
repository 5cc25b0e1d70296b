package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
)

// openVersion (Open with Versioned) streams the object; its version is
// the ETag (ReadVersion's). Reread is a GET of that ETag only (If-Match),
// checked to be the same bytes: a reader that keeps what it read (a small
// catalog) never asks for it, so nothing is kept here.
func (b *Backend) openVersion(ctx context.Context, p string) (storage.Reader, error) {
	key, err := b.key(p)
	if err != nil {
		return storage.Reader{}, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return storage.Reader{}, b.wrap("open", key, err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		out.Body.Close()
		return storage.Reader{}, fmt.Errorf("s3 read s3://%s/%s: the server returned no ETag, which compare-and-swap needs", b.bucket, key)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	body := &objectBody{ReadCloser: out.Body, b: b, key: key}
	tally := storage.NewTally(body)
	version := func() (storage.Version, error) {
		if done, _ := tally.Done(); !done {
			return "", fmt.Errorf("version of s3://%s/%s asked before its end was read", b.bucket, key)
		}
		return storage.Version(etag), nil
	}
	reread := func(ctx context.Context) (io.ReadCloser, error) {
		again, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: aws.String(etag)})
		if err != nil {
			if s := httpStatus(err); s == 412 || s == 404 {
				return nil, fmt.Errorf("s3 read s3://%s/%s: it changed since it was read: %w", b.bucket, key, storage.ErrConflict)
			}
			return nil, b.wrap("read", key, err)
		}
		return tally.Same(&objectBody{ReadCloser: again.Body, b: b, key: key}, "s3://"+b.bucket+"/"+key), nil
	}
	return storage.Reader{ReadCloser: struct {
		io.Reader
		io.Closer
	}{tally, body}, Size: size, Version: version, Reread: reread}, nil
}
