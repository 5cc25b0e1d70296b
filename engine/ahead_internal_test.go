package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// The next catalog is encoded ahead only for a root that commits it whole
// in one request (S3); the encoding is the catalog's bytes, its write
// prepared by the root (its sha256), committed under the compare-and-swap's
// condition like WriteIfVersion, with the same sha256 metadata.
func TestCatalogIsEncodedAheadOnlyForOneRequestCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	next := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	want, err := catalog.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var e Engine // the default catalog size bounds
	if a := e.encodeAhead(disk, next); a != nil {
		t.Fatal("a local root (a VersionPreparer) got its catalog encoded ahead")
	}
	srv := testenv.NewS3(t)
	root := srv.Backend(t, srv.Bucket(t), "site")
	a := e.encodeAhead(root, next)
	if a == nil {
		t.Fatal("an S3 root did not get its catalog encoded ahead")
	}
	pv, err := a.prepared(root)
	if err != nil {
		t.Fatal(err)
	}
	if a.write == nil {
		t.Fatal("the S3 root's write was not prepared with the encoding")
	}
	defer pv.Close()
	// The condition holds: none there yet. Then it no longer does.
	v, err := pv.CommitIfVersion(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got, gotV, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || gotV != v {
		t.Fatalf("committed %q (version %s), want %q (version %s)", got, gotV, want, v)
	}
	sum := sha256.Sum256(want)
	if info, err := root.Stat(ctx, catalog.FileName); err != nil || info.SHA256 != catalog.Digest(sum[:]) {
		t.Fatalf("committed catalog's sha256 = %q (%v), want %s", info.SHA256, err, catalog.Digest(sum[:]))
	}
	if _, err := pv.CommitIfVersion(ctx, ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second create-only commit: err = %v, want ErrConflict", err)
	}
}
