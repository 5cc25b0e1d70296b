package fakes3

import (
	"strings"

	"github.com/johannesboyne/gofakes3"
)

// delimited is gofakes3's listing with the delimiter "/", without its
// cost: gofakes3 walks the whole bucket for every such request, from its
// first key to its last, splitting each key at the delimiter, so
// listing one folder costs as much as listing the bucket (rclone lists a
// folder at a time). This reads only the keys under the prefix,
// a page of the backend at a time, and folds them as gofakes3 does. On
// the keys where gofakes3's folding is not S3's plain one (a key that
// starts or ends with "/" or holds "//", a prefix likewise) it answers
// ok = false, for gofakes3 to answer.
func (s *Server) delimited(bucket, prefix string, page gofakes3.ListBucketPage) (_ *gofakes3.ObjectList, ok bool, _ error) {
	if strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "//") {
		return nil, false, nil
	}
	out := gofakes3.NewObjectList()
	cursor := page.Marker
	if prefix != "" && cursor < prefix {
		// Any key under the prefix sorts after this one: start there, not
		// at the bucket's first key.
		cursor = prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]-1) + "\xff"
	}
	var count int64
	lastPrefix := ""
	for {
		objs, err := s.Mem.ListBucket(bucket, &gofakes3.Prefix{HasPrefix: prefix != "", Prefix: prefix},
			gofakes3.ListBucketPage{Marker: cursor, HasMarker: cursor != "", MaxKeys: gofakes3.MaxBucketKeys})
		if err != nil {
			return nil, false, err
		}
		for _, c := range objs.Contents {
			if odd(c.Key) {
				return nil, false, nil
			}
			rest := c.Key[len(prefix):]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				p := prefix + rest[:i+1]
				if p == lastPrefix {
					continue // counts once
				}
				out.AddPrefix(p)
				lastPrefix = p
			} else {
				out.Add(c)
			}
			count++
			if page.MaxKeys > 0 && count >= page.MaxKeys {
				// gofakes3: truncated when any key at all follows.
				out.NextMarker = c.Key
				next, err := s.Mem.ListBucket(bucket, nil, gofakes3.ListBucketPage{Marker: c.Key, HasMarker: true, MaxKeys: 1})
				if err != nil {
					return nil, false, err
				}
				out.IsTruncated = len(next.Contents) > 0
				return out, true, nil
			}
		}
		if !objs.IsTruncated || len(objs.Contents) == 0 {
			return out, true, nil
		}
		cursor = objs.Contents[len(objs.Contents)-1].Key
	}
}

// odd: a key gofakes3 folds in its own way at "/".
func odd(key string) bool {
	return strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.Contains(key, "//")
}
