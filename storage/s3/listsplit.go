package s3

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

var _ storage.SplitLister = (*Backend)(nil)

// listRanges is how many key ranges ListSplit reads at once.
const listRanges = 4

// ListSplit lists the root as List does, reading the ranges between
// consecutive splits at once (StartAfter the range's first split, pages
// until its last): a root of 10,000 objects split every 1,000 is 10
// requests in flight 4 at a time instead of 10 in a row. Splits that are
// not increasing valid paths fall back to List.
func (b *Backend) ListSplit(ctx context.Context, splits []string, fn func(storage.ObjectInfo) error) error {
	for i, s := range splits {
		if catalog.ValidatePath(s) != nil || (i > 0 && splits[i-1] >= s) {
			return b.List(ctx, "", fn)
		}
	}
	ranges := make([][]storage.ObjectInfo, len(splits)+1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listRanges)
	for i := range ranges {
		var after, upto string // (after, upto]; "" = open
		if i > 0 {
			after = splits[i-1]
		}
		if i < len(splits) {
			upto = splits[i]
		}
		g.Go(func() error {
			var err error
			ranges[i], err = b.listRange(gctx, after, upto)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, objs := range ranges {
		for _, o := range objs {
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
