package stores_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
)

// s3Env points the standard AWS credential chain at static test values, as
// an operator's environment would; nothing comes from ~/.aws.
func s3Env(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
}

func TestBundleOnS3IsReadAndVerifiedThroughTheCredentialChain(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewS3(t)
	if srv.External {
		t.Skip("uses the in-process server's static test credentials")
	}
	s3Env(t)
	bucket := srv.Bucket(t)

	// Make a bundle locally, then upload it under a prefix.
	dir := t.TempDir()
	files := map[string]string{"report.md": "# Tomorrow\n", "data/a b.csv": "x,y\n"}
	testenv.WriteBundle(t, dir, "weatherreporter.tomorrow", time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC), files)
	manifest, err := os.ReadFile(filepath.Join(dir, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	up := srv.Backend(t, bucket, "bundles/run-1/")
	put := func(p string, data []byte) {
		if _, err := up.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(bundle.ManifestName, manifest)
	for p, c := range files {
		put(p, []byte(c))
	}

	o := stores.New(&config.Config{S3: config.S3Defaults{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1"}})
	loc := "s3://" + bucket + "/bundles/run-1/"
	store, err := o.Bundle(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(ctx, store, loc, bundle.Digest(manifest), 0)
	if err != nil {
		t.Fatalf("open S3 bundle: %v", err)
	}
	rep, err := b.Verify(ctx)
	if err != nil || !rep.OK() || rep.Files != 2 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}

	// Damage one file in place: streaming verification catches it.
	put("data/a b.csv", []byte("x,z\n"))
	if _, err := b.Verify(ctx); !errors.Is(err, bundle.ErrContentMismatch) {
		t.Fatalf("verify after damage: %v, want ErrContentMismatch", err)
	}

	// A prefix with no manifest is a clear error, not an empty bundle.
	empty, err := o.Bundle(ctx, "s3://"+bucket+"/nothing-here/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Open(ctx, empty, "s3://"+bucket+"/nothing-here/", "", 0); !errors.Is(err, bundle.ErrNoManifest) {
		t.Fatalf("open empty prefix: %v, want ErrNoManifest", err)
	}
}

func TestS3DestinationRootsAreSharedPerRootKey(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewS3(t)
	if srv.External {
		t.Skip("uses the in-process server's static test credentials")
	}
	s3Env(t)
	bucket := srv.Bucket(t)
	cfg := &config.Config{S3: config.S3Defaults{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1"}}
	a := config.Destination{ID: "a", Backend: config.BackendS3, Bucket: bucket, Path: "site/", Endpoint: srv.URL, PathStyle: true, Region: "us-east-1"}
	b := a
	b.ID = "b"
	o := stores.New(cfg)
	ra, err := o.Destination(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := o.Destination(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if ra != rb {
		t.Fatal("two destinations with one root got two backends")
	}
	if got, want := ra.String(), "s3://"+bucket+"/site/"; got != want {
		t.Fatalf("root = %q, want %q", got, want)
	}
	if _, err := ra.Put(ctx, "x.txt", bytes.NewReader([]byte("x")), 1, storage.PutOptions{}); err != nil {
		t.Fatalf("put through the credential chain: %v", err)
	}
	if _, err := srv.Backend(t, bucket, "").Stat(ctx, "site/x.txt"); err != nil {
		t.Fatalf("object not under the prefix: %v", err)
	}
}

func TestUnknownSchemeAndBackendAreClearErrors(t *testing.T) {
	o := stores.New(nil)
	if _, err := o.Bundle(context.Background(), "ftp://host/x/"); err == nil {
		t.Fatal("ftp:// bundle location accepted")
	}
	if _, err := o.Destination(context.Background(), config.Destination{ID: "d", Backend: "gcs"}); err == nil || err.Error() != `destination "d": unknown backend "gcs": use local or s3` {
		t.Fatalf("unknown backend: %v", err)
	}
}

// TestDestinationFollowsASwappedRoot: each Destination call resolves the
// configured path afresh, so a root moved away and replaced (or deleted and
// recreated) is the new folder from the next call on, and a root that is
// gone is ErrRootMissing, not a backend on a folder nobody sees.
func TestDestinationFollowsASwappedRoot(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d := config.Destination{ID: "d", Backend: config.BackendLocal, Path: root}
	o := stores.New(nil)
	put := func(name string) {
		t.Helper()
		b, err := o.Destination(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, name, bytes.NewReader([]byte(name)), int64(len(name)), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}

	first, err := o.Destination(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := o.Destination(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Fatal("an unchanged root was opened twice")
	}
	put("1.txt")

	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	put("2.txt")
	if !exists(filepath.Join(root, "2.txt")) || exists(filepath.Join(root+".old", "2.txt")) {
		t.Fatalf("after mv root root.old && mkdir root, 2.txt went to root.old (root has it: %v)", exists(filepath.Join(root, "2.txt")))
	}

	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	_, err = o.Destination(ctx, d)
	want := "destination root " + root + " does not exist (moved or deleted?): recreate the folder or fix the destination's path"
	if !errors.Is(err, storage.ErrRootMissing) || err.Error() != want {
		t.Fatalf("Destination after rm -rf root = %v, want %q", err, want)
	}

	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	put("3.txt")
	if !exists(filepath.Join(root, "3.txt")) {
		t.Fatal("after mkdir root, 3.txt is not in the new root")
	}
}

// A bundle location that names a file is a missing bundle, not a missing
// destination root (the consumer reports bundle_missing, not root_missing).
func TestBundleOnAFileIsMissingBundle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bundle")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := stores.New(nil).Bundle(context.Background(), file)
	if want := "bundle folder " + file + " does not exist"; !errors.Is(err, storage.ErrNotExist) || errors.Is(err, storage.ErrRootMissing) || err.Error() != want {
		t.Fatalf("Bundle(file) = %v, want %q (ErrNotExist only)", err, want)
	}
}
