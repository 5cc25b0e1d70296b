package engine_test

import (
	"fmt"
	"testing"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
)

// s3RepublishRequests publishes n files to a fresh S3 root, then
// republishes with every step-th file changed (none when step is 0), and
// returns the HTTP requests of the republish.
func s3RepublishRequests(t *testing.T, n, step int) []string {
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	root, reqs := srv.CountedBackend(t, bucket, s3Prefix)
	h := newHarness(t)
	base := config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
		Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	h.addDest(named(base, "archive", planner.Replacement), root, pipeA)
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d%02d/f%04d.txt", i%10, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.mustPublish(t1, pipeA, "archive", "weatherreporter.today", files)
	changed := 0
	for i := 0; step > 0 && i < n; i += step {
		files[fmt.Sprintf("d%02d/f%04d.txt", i%10, i)] = fmt.Sprintf("file %d, changed\n", i)
		changed++
	}
	dir, _ := makeBundle(t, "weatherreporter.today", files)
	reqs.Reset()
	res, err := h.publish(t2, pipeA, "archive", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != changed {
		t.Fatalf("written %d, want %d", len(res.Written), changed)
	}
	return reqs.Lines()
}

func TestS3RepublishRequestsFollowTheChange(t *testing.T) {
	for _, step := range []int{100, 0} {
		t.Run(fmt.Sprintf("step=%d", step), func(t *testing.T) {
			lines := s3RepublishRequests(t, 1000, step)
			t.Logf("%d requests", len(lines))
			for _, l := range lines {
				t.Log(l)
			}
		})
	}
}
