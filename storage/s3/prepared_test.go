package s3_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
	"github.com/distributor/distributor/testenv"
)

// A prepared catalog sends nothing until committed, and its commit is
// WriteIfVersion of the catalog's bytes: the same conditions, the same
// sha256 metadata.
func TestPreparedCatalogIsWriteIfVersion(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	b := env.Backend(t, env.Bucket(t), "root")
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	first := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	second := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at.Add(time.Second)}
	pc := b.PrepareCatalog(t.Context(), storagetest.CatalogDocument(first), 10)
	defer pc.Close()
	wantNoObject(t, b, catalog.FileName)
	v1, err := pc.Commit(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Commit(t.Context(), ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create-only commit over an object: err = %v, want ErrConflict", err)
	}
	next := b.PrepareCatalog(t.Context(), storagetest.CatalogDocument(second), 0)
	defer next.Close()
	v2, err := next.Commit(t.Context(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Commit(t.Context(), v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("commit at a replaced version: err = %v, want ErrConflict", err)
	}
	want, err := catalog.Marshal(second)
	if err != nil {
		t.Fatal(err)
	}
	got, gotV, err := b.ReadVersion(t.Context(), catalog.FileName)
	if err != nil || !bytes.Equal(got, want) || gotV != v2 {
		t.Fatalf("stored %q at %s (%v), want %q at %s", got, gotV, err, want, v2)
	}
	sum := sha256.Sum256(want)
	if info, err := b.Stat(t.Context(), catalog.FileName); err != nil || info.SHA256 != catalog.Digest(sum[:]) {
		t.Fatalf("sha256 metadata %q (%v), want %s", info.SHA256, err, catalog.Digest(sum[:]))
	}
}

// A missing key is told from a missing bucket with one HeadBucket, only
// until a request on an object of the bucket has succeeded: a republish
// starts with the catalog's HEAD and the lock's conditional PUT, so its
// first 404 (the intent) costs no extra round trip.
func TestBucketSeenThroughItsObjects(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	seed := env.Backend(t, bucket, "root")
	if _, err := seed.WriteIfVersion(t.Context(), "x", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		first func(storage.Backend) error
		want  []string
	}{
		{"nothing before", func(storage.Backend) error { return nil },
			[]string{"HEAD root/missing", "HEAD "}},
		{"a HEAD that found its object", func(b storage.Backend) error { _, err := b.Stat(t.Context(), "x"); return err },
			[]string{"HEAD root/x", "HEAD root/missing"}},
		{"a conditional write", func(b storage.Backend) error {
			_, err := b.WriteIfVersion(t.Context(), "y", []byte("y"), "")
			return err
		},
			[]string{"PUT root/y if-none-match", "HEAD root/missing"}},
	} {
		b, reqs := env.CountedBackend(t, bucket, "root")
		if err := c.first(b); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(t.Context(), "missing"); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("%s: Stat(missing) err = %v, want ErrNotExist", c.name, err)
		}
		if got := reqs.Lines(); !slices.Equal(got, c.want) {
			t.Errorf("%s: requests %q, want %q", c.name, got, c.want)
		}
	}
}
