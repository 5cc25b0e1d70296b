package s3_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// A prepared write sends nothing until committed, and its commit is
// WriteIfVersion: the same conditions, the same bytes and sha256 metadata.
func TestPreparedWriteIsWriteIfVersion(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	b := env.Backend(t, env.Bucket(t), "root")
	wp, ok := b.(storage.WritePreparer)
	if !ok {
		t.Fatal("the S3 backend does not prepare writes")
	}
	first, second := []byte(`{"n":1}`), []byte(`{"n":2}`)
	pv := wp.PrepareWrite(".distributor.json", first)
	defer pv.Close()
	wantNoObject(t, b, ".distributor.json")
	v1, err := pv.CommitIfVersion(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pv.CommitIfVersion(t.Context(), ""); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create-only commit over an object: err = %v, want ErrConflict", err)
	}
	next := wp.PrepareWrite(".distributor.json", second)
	v2, err := next.CommitIfVersion(t.Context(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.CommitIfVersion(t.Context(), v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("commit at a replaced version: err = %v, want ErrConflict", err)
	}
	got, gotV, err := b.ReadVersion(t.Context(), ".distributor.json")
	if err != nil || !bytes.Equal(got, second) || gotV != v2 {
		t.Fatalf("stored %q at %s (%v), want %q at %s", got, gotV, err, second, v2)
	}
	sum := sha256.Sum256(second)
	if info, err := b.Stat(t.Context(), ".distributor.json"); err != nil || info.SHA256 != catalog.Digest(sum[:]) {
		t.Fatalf("sha256 metadata %q (%v), want %s", info.SHA256, err, catalog.Digest(sum[:]))
	}
}
