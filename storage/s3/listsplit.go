package s3

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// listRanges is how many key ranges ListSplit reads at once.
const listRanges = 4

// ListSplit lists the root as List does, reading the ranges between
// consecutive splits at once (StartAfter the range's first split, pages
// until its last): a root of 10,000 objects split every 1,000 is 10
// requests, 4 in flight, instead of 10 in a row. Ranges are handed to fn
// in order as they arrive, and at most 4 are held at a time (listed or
// waiting for an earlier one). Splits that are not increasing valid
// paths fall back to List.
func (b *Backend) ListSplit(ctx context.Context, splits []string, fn func(storage.ObjectInfo) error) error {
	for i, s := range splits {
		if catalog.ValidatePath(s) != nil || (i > 0 && splits[i-1] >= s) {
			return b.List(ctx, "", fn)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing of ranges nobody will take
	type listed struct {
		objs []storage.ObjectInfo
		err  error
	}
	results := make([]chan listed, len(splits)+1)
	for i := range results {
		results[i] = make(chan listed, 1)
	}
	window := make(chan struct{}, listRanges)
	go func() {
		for i := range results {
			select {
			case window <- struct{}{}: // freed when range i-listRanges was handed over
			case <-ctx.Done():
				return
			}
			var after, upto string // (after, upto]; "" = open
			if i > 0 {
				after = splits[i-1]
			}
			if i < len(splits) {
				upto = splits[i]
			}
			go func() {
				objs, err := b.listRange(ctx, after, upto)
				results[i] <- listed{objs, err}
			}()
		}
	}()
	for i := range results {
		var r listed
		select {
		case r = <-results[i]:
		case <-ctx.Done(): // the caller's: range i may never start
			return b.wrap("list", b.prefix, ctx.Err())
		}
		<-window
		if r.err != nil {
			return r.err
		}
		for _, o := range r.objs {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// listRange lists the paths in (after, upto], "" leaving that end open.
func (b *Backend) listRange(ctx context.Context, after, upto string) ([]storage.ObjectInfo, error) {
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(b.prefix)}
	if after != "" {
		in.StartAfter = aws.String(b.prefix + after)
	}
	var out []storage.ObjectInfo
	for {
		page, err := b.listPage(ctx, in)
		if err != nil {
			return nil, b.wrap("list", b.prefix+after, err)
		}
		for _, o := range page.objects {
			p, ok := strings.CutPrefix(o.key, b.prefix)
			if !ok {
				continue
			}
			if upto != "" && p > upto {
				return out, nil // the next range's
			}
			if !strings.HasSuffix(p, "/") && catalog.ValidatePath(p) == nil {
				out = append(out, storage.ObjectInfo{Path: p, Size: o.size, ModTime: o.modTime, Fingerprint: o.etag})
			}
			if p == upto {
				return out, nil // no request for a page of the next range
			}
		}
		if !page.truncated || page.next == "" {
			return out, nil
		}
		in.ContinuationToken = aws.String(page.next)
	}
}
