package engine_test

import (
	"fmt"
	"strings"
	"testing"
)

// A republish to S3 lists the root split at every 1,000th record of the
// catalog it read, the ranges read at once: the ranges after the first
// start after those records' keys. (The listing waits for the catalog's
// parse to know them; a plain listing is a page after a page.)
func TestS3RepublishListsInRangesSplitAtTheCatalog(t *testing.T) {
	t.Parallel()
	const n = 2500
	got, _ := s3RepublishRequests(t, n, 100)
	var lists []string
	for _, l := range got {
		if strings.HasPrefix(l, "LIST ") {
			lists = append(lists, l)
		}
	}
	// The catalog's records in path order: d00/f0000, d00/f0010, …. The
	// first split is at the 500th record, d01/f2491 (the reserved files
	// sort first: a first range of 1,000 records would take two pages, one
	// after the other), then every 1,000th: the 1,500th, d05/f2495; not at
	// the 2,500th, the last (the range past it would be one request more
	// for nothing). One page a range.
	at := func(i int) string { return fmt.Sprintf("d%02d/f%04d.txt", i/(n/10), (i%(n/10))*10+i/(n/10)) }
	want := []string{
		"LIST " + s3Prefix, // the reserved files and d00/… to d01/f2491
		"LIST " + s3Prefix + " after=" + s3Prefix + at(499),
		"LIST " + s3Prefix + " after=" + s3Prefix + at(1499),
	}
	wantStrings(t, "listing requests", lists, want)
}
