package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
)

// openVersion (Open with Versioned) streams the object; its version is the ETag (ReadVersion's).
// Reread gives the bytes kept as read of an object of up to keepMax bytes
// (a request costs more than the memory), else a GET of that ETag only
// (If-Match), checked to be the same bytes.
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
	var kept *bytes.Buffer
	var r io.Reader = body
	if size >= 0 && size <= keepMax {
		kept = bytes.NewBuffer(make([]byte, 0, size))
		r = io.TeeReader(body, kept)
	}
	tally := storage.NewTally(r)
	version := func() (storage.Version, error) {
		if done, _ := tally.Done(); !done {
			return "", fmt.Errorf("version of s3://%s/%s asked before its end was read", b.bucket, key)
		}
		return storage.Version(etag), nil
	}
	reread := func(ctx context.Context) (io.ReadCloser, error) {
		if done, _ := tally.Done(); done && kept != nil {
			return io.NopCloser(bytes.NewReader(kept.Bytes())), nil
		}
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

// keepMax is the largest object openVersion keeps as read for Reread.
const keepMax = 8 << 20
