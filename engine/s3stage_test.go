package engine_test

import (
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// Large outputs on S3 are staged as multipart uploads completed at commit:
// a damaged bundle leaves no object and no upload; a repaired one lands;
// and the next publication of the same bytes finds them unchanged although
// gofakes3 lists them with another ETag than the one the commit returned.
func TestS3LargeOutputsAreStaged(t *testing.T) {
	t.Parallel()
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	root := srv.Backend(t, bucket, s3Prefix)
	dest := config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix, Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	h := newHarness(t)
	h.AddDest(named(dest, "archive", planner.Replacement), root, pipeA)
	files := map[string]string{
		"big/a.bin": strings.Repeat("a large staged output\n", 100_000), // 2.2 MB: over the in-memory limit
		"big/b.bin": strings.Repeat("another large output\n", 100_000),
		"small.txt": "small",
	}
	dir, _ := makeBundle(t, "weatherreporter.today", files)
	flipFileByte(t, filepath.Join(dir, "big/b.bin"))
	if _, err := h.Publish(t1, pipeA, "archive", dir); !errors.Is(err, bundle.ErrContentMismatch) {
		t.Fatalf("err = %v, want ErrContentMismatch", err)
	}
	if got := contents(t, root); len(got) != 0 {
		t.Fatalf("root after a damaged bundle holds %d objects, want none", len(got))
	}
	wantNoLeftovers(t, root)

	dir, _ = makeBundle(t, "weatherreporter.today", files)
	res, err := h.Publish(t1, pipeA, "archive", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 3 {
		t.Fatalf("written %d outputs, want 3", len(res.Written))
	}
	got := contents(t, root)
	for p, want := range files {
		if got[p] != want {
			t.Fatalf("%s: %d bytes stored, want the bundle's %d", p, len(got[p]), len(want))
		}
	}
	wantNoLeftovers(t, root)
	assertDescribesStorage(t, root)

	dir, _ = makeBundleAt(t, "weatherreporter.today", t0.Add(time.Minute), files)
	res, err = h.Publish(t2, pipeA, "archive", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 0 {
		t.Fatalf("republish of the same bytes wrote %v, want nothing", itemPaths(res.Written))
	}
	if got2 := contents(t, root); !maps.Equal(got2, got) {
		t.Fatal("republish of the same bytes changed the root")
	}
}

func wantNoLeftovers(t *testing.T, root storage.Backend) {
	t.Helper()
	ls, err := root.Leftovers(t.Context(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 0 {
		t.Fatalf("%d unfinished uploads left, want none (first %s)", len(ls), ls[0].Path)
	}
}
