package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// uploadParts sends a large staged object as the parts of a new multipart
// upload, Concurrency parts at once: the source is read once, in order,
// into part buffers taken from the memory budget ((Concurrency+1) parts:
// those in flight and the one being read), and each part is signed with
// its own sha256, taken in the part's goroutine. Parts are resent by the
// SDK on a transient failure (a buffer seeks). The source's size and
// digest are checked as the last part is read (checkedReader), before it
// is sent; any failure aborts the upload, so nothing is ever visible.
func (s *stage) uploadParts(ctx context.Context, o *stagedObject, body *checkedReader) error {
	partSize := s.b.partSize
	if o.size/partSize >= int64(maxUploadParts) {
		partSize = o.size/int64(maxUploadParts) + 1 // S3 allows 10,000 parts
	}
	buffers := int64(s.b.concurrency + 1)
	if buffers*partSize > s.b.budget {
		buffers = max(2, s.b.budget/partSize)
	}
	weight := min(s.b.budget, buffers*partSize)
	if err := s.b.mem.acquire(ctx, weight); err != nil {
		return fmt.Errorf("stage %s: %w", body.where, err)
	}
	defer s.b.mem.release(weight)
	in := &s3.CreateMultipartUploadInput{Bucket: &s.b.bucket, Key: &o.key, Metadata: map[string]string{metaSHA256: o.opts.SHA256}}
	if o.opts.ContentType != "" {
		in.ContentType = aws.String(o.opts.ContentType)
	}
	created, err := s.b.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return fmt.Errorf("stage %s: %w", body.where, s.b.wrap("start upload", o.key, err))
	}
	o.uploadID = aws.ToString(created.UploadId)
	if err := s.sendParts(ctx, o, body, partSize, int(buffers)); err != nil {
		return fmt.Errorf("stage %s: %w", body.where, s.b.abortAfter(ctx, o.key, o.uploadID, err))
	}
	return nil
}

// sendParts reads the parts in turn and uploads up to buffers-1 of them
// while the next is read.
func (s *stage) sendParts(ctx context.Context, o *stagedObject, body *checkedReader, partSize int64, buffers int) error {
	free := make(chan []byte, buffers)
	allocated := 0
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	var parts []types.CompletedPart
	for n, off := int32(1), int64(0); off < o.size; n, off = n+1, off+partSize {
		if gctx.Err() != nil {
			return s.partsFailed(g, body)
		}
		var buf []byte
		if allocated < buffers {
			buf, allocated = make([]byte, partSize), allocated+1
		} else {
			select {
			case buf = <-free:
			case <-gctx.Done():
				return s.partsFailed(g, body)
			}
		}
		part := buf[:min(partSize, o.size-off)]
		if _, err := io.ReadFull(body, part); err != nil {
			if body.err != nil && body.err != io.EOF {
				err = body.err // the source's own account (size, digest, its error)
			}
			_ = g.Wait()
			return err
		}
		// A part already sent finishes even when another fails (on ctx,
		// not gctx): a server may store a part whose request the client
		// abandoned after the abort that follows, and so bring the upload
		// back. No new part starts once one has failed.
		g.Go(func() error {
			defer func() { free <- buf }()
			sum := sha256.Sum256(part)
			out, err := s.b.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.b.bucket, Key: &o.key, UploadId: &o.uploadID,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part)))},
				withPayloadHashHex(hex.EncodeToString(sum[:])))
			if err != nil {
				return s.b.wrap(fmt.Sprintf("upload part %d", n), o.key, err)
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if o.size == 0 || body.n != o.size {
		return fmt.Errorf("source read %d of the announced %d bytes", body.n, o.size)
	}
	sort.Slice(parts, func(i, j int) bool { return *parts[i].PartNumber < *parts[j].PartNumber })
	o.parts = parts
	return nil
}

// partsFailed waits for the parts in flight and returns the first error.
func (s *stage) partsFailed(g *errgroup.Group, body *checkedReader) error {
	err := g.Wait()
	if err == nil {
		err = body.ctx.Err()
	}
	return err
}
