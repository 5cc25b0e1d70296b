package engine_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
)

// s3RepublishRequests publishes n files to a fresh S3 root, then
// republishes them from a new bundle with every step-th file changed (none
// when step is 0). It returns the HTTP requests of the republish, sorted
// (writes run in parallel), the pending report's name generalized, and
// the changed paths.
func s3RepublishRequests(t *testing.T, n, step int) (requests, changed []string) {
	return s3RepublishChanging(t, n, func(files map[string]string) []string {
		for i := 0; step > 0 && i < n; i += step {
			p := fmt.Sprintf("d%02d/f%04d.txt", i%10, i)
			files[p] = fmt.Sprintf("file %d, changed\n", i)
			changed = append(changed, p)
		}
		return changed
	})
}

// s3RepublishChanging is s3RepublishRequests with the files of the
// republish changed by change, which returns the paths it wrote.
func s3RepublishChanging(t *testing.T, n int, change func(files map[string]string) []string) (requests, changed []string) {
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	root, reqs := srv.CountedBackend(t, bucket, s3Prefix)
	h := newHarness(t)
	base := config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
		Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	h.AddDest(named(base, "archive", planner.Replacement), root, pipeA)
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d%02d/f%04d.txt", i%10, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", files)
	changed = change(files)
	dir, _ := makeBundle(t, "weatherreporter.today", files)
	reqs.Reset()
	res, err := h.Publish(t2, pipeA, "archive", dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(changed)
	wantStrings(t, "written", sortedPaths(res.Written), changed)
	for _, l := range reqs.Lines() {
		if strings.HasPrefix(l, "GET "+s3Prefix+".distributor/reports/") {
			l = "GET " + s3Prefix + ".distributor/reports/…" // named by the event id
		}
		requests = append(requests, l)
	}
	sort.Strings(requests)
	return requests, changed
}

func sortedPaths(items []planner.Item) []string {
	out := itemPaths(items)
	sort.Strings(out)
	return out
}

// A republish to S3 costs the changed objects' PUTs plus a constant: the
// lock (written, read back before the commit, removed), the catalog,
// intent and pending report (the intent written and removed
// conditionally), the listing (a page per
// 1000 objects), one fingerprint shard read and rewritten (the index of a
// root of 1000 outputs is one shard), the catalog's conditional write.
func TestS3RepublishRequestsAreTheChangePlusAConstant(t *testing.T) {
	t.Parallel()
	const n = 1000
	shard := s3Prefix + engine.FingerprintsFile("", engine.FingerprintShards(n))
	fixed := []string{
		"PUT " + s3Prefix + lease.LockPath + " if-none-match", // the lease's lock object
		"GET " + s3Prefix + engine.IntentPath, "GET " + s3Prefix + ".distributor/reports/…",
		"GET " + s3Prefix + catalog.FileName, "LIST " + s3Prefix, "LIST " + s3Prefix,
		"GET " + shard,
		"GET " + s3Prefix + lease.LockPath,                 // the lease confirmed right before the compare-and-swap
		"PUT " + s3Prefix + catalog.FileName + " if-match", // the compare-and-swap
		"HEAD " + s3Prefix + lease.LockPath, "DELETE " + s3Prefix + lease.LockPath + " if-match",
	}
	t.Run("1% changed", func(t *testing.T) {
		t.Parallel()
		got, changed := s3RepublishRequests(t, n, 100)
		// The intent is written only where none is and removed only while
		// it is this run's: a stale holder never replaces or removes a
		// newer holder's.
		want := append(fixed, "PUT "+s3Prefix+engine.IntentPath+" if-none-match",
			"HEAD "+s3Prefix+engine.IntentPath, "DELETE "+s3Prefix+engine.IntentPath+" if-match", "PUT "+shard)
		for _, p := range changed {
			want = append(want, "PUT "+s3Prefix+p+" if-match")
		}
		sort.Strings(want)
		wantStrings(t, "requests", got, want)
	})
	t.Run("nothing changed", func(t *testing.T) {
		t.Parallel()
		// The records change (a new bundle), the objects do not.
		got, _ := s3RepublishRequests(t, n, 0)
		want := append([]string(nil), fixed...)
		sort.Strings(want)
		wantStrings(t, "requests", got, want)
	})
	t.Run("outputs changed and removed", func(t *testing.T) {
		t.Parallel()
		// The shard is read once, whole, and rewritten without the
		// entries of the outputs the replacement removes: none is left
		// to read again.
		got, changed := s3RepublishChanging(t, n, func(files map[string]string) (written []string) {
			for i := 0; i < n; i += 100 {
				delete(files, fmt.Sprintf("d%02d/f%04d.txt", i%10, i))
				p := fmt.Sprintf("d%02d/f%04d.txt", (i+50)%10, i+50)
				files[p] = fmt.Sprintf("file %d, changed\n", i+50)
				written = append(written, p)
			}
			return written
		})
		want := append(fixed, "PUT "+s3Prefix+engine.IntentPath+" if-none-match",
			"HEAD "+s3Prefix+engine.IntentPath, "DELETE "+s3Prefix+engine.IntentPath+" if-match",
			"PUT "+shard, "DELETE-BATCH") // the removed outputs, in one request
		for _, p := range changed {
			want = append(want, "PUT "+s3Prefix+p+" if-match")
		}
		sort.Strings(want)
		wantStrings(t, "requests", got, want)
	})
}
