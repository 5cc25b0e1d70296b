package engine_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
)

// A republish to S3 lists the root in ranges read at once: split at every
// 1,000th of the publication's paths when the catalog holds at most
// about twice as many records (the listing then starts while the catalog
// is parsed), the ranges after the first starting after those keys.
func TestS3RepublishListsInRangesSplitAtTheCatalog(t *testing.T) {
	t.Parallel()
	const n = 2500
	got, _ := s3RepublishRequests(t, n, 100)
	// The paths in order: d00/f0000, d00/f0010, …. The first split is at
	// the 500th, d01/f2491 (the reserved files sort first: a first range
	// of 1,000 paths would take two pages, one after the other), then
	// every 1,000th: the 1,500th, d05/f2495; not the 2,500th, the last
	// (the range past it would be one request more for nothing). One page
	// a range.
	at := func(i int) string { return fmt.Sprintf("d%02d/f%04d.txt", i/(n/10), (i%(n/10))*10+i/(n/10)) }
	want := []string{
		"LIST " + s3Prefix, // the reserved files and d00/… to d01/f2491
		"LIST " + s3Prefix + " after=" + s3Prefix + at(499),
		"LIST " + s3Prefix + " after=" + s3Prefix + at(1499),
	}
	wantStrings(t, "listing requests", listings(got), want)
}

// Where the splits come from: the publication's paths when the catalog
// holds at most about twice as many records (2,500 records against 2,500
// outputs), else the catalog's records (7,000 against 2,000)
// (the publication's paths may sit together in a larger root, and ranges
// between them would hold many pages each).
func TestS3ListingSplitsFollowTheLargerSide(t *testing.T) {
	t.Parallel()
	files := func(dir string, n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("%s/f%04d.txt", dir, i)] = fmt.Sprintf("%s %d\n", dir, i)
		}
		return m
	}
	after := func(dir string, is ...int) []string {
		out := []string{"LIST " + s3Prefix}
		for _, i := range is {
			out = append(out, fmt.Sprintf("LIST %s after=%s%s/f%04d.txt", s3Prefix, s3Prefix, dir, i))
		}
		return out
	}
	t.Run("replacing a root with other paths splits at the new paths", func(t *testing.T) {
		t.Parallel()
		h, reqs := s3ListingHarness(t)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", files("a", 2500))
		reqs.Reset()
		h.MustPublish(t2, pipeA, "archive", "weatherreporter.today", files("b", 2500))
		// The first range holds the 2,500 a/… objects the publication
		// replaces: 3 pages, one after the other, while the others run.
		want := append([]string{"LIST " + s3Prefix, "LIST " + s3Prefix}, after("b", 499, 1499)...)
		wantStrings(t, "listing requests", listings(reqs.Lines()), want)
	})
	t.Run("adding to a larger root splits at the catalog's records", func(t *testing.T) {
		t.Parallel()
		h, reqs := s3ListingHarness(t)
		h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", files("a", 7000))
		reqs.Reset()
		h.MustPublish(t2, pipeB, "tides", "tides.now", files("b", 2000))
		wantStrings(t, "listing requests", listings(reqs.Lines()), after("a", 499, 1499, 2499, 3499, 4499, 5499, 6499))
	})
}

// s3ListingHarness: a fresh S3 root, counted, with destination "archive"
// (replacement, pipeA) and "tides" (additive, pipeB).
func s3ListingHarness(t *testing.T) (*harness, *testenv.Requests) {
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	root, reqs := srv.CountedBackend(t, bucket, s3Prefix)
	h := newHarness(t)
	base := config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
		Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
	h.AddDest(named(base, "tides", planner.Additive), root, pipeB)
	return h, reqs
}

// listings are the listing requests of lines, in order of their keys.
func listings(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "LIST ") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}
