package local

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// The prepared commit is a compare-and-swap: against a version that is no
// longer current it fails with ErrConflict and changes nothing, and Close
// leaves no temp file behind.
func TestPreparedVersionConflictChangesNothing(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { preparedConflictChangesNothing(t, ti.new(t)) })
}

func preparedConflictChangesNothing(t *testing.T, b *Backend) {
	ctx := context.Background()
	v1, err := b.WriteIfVersion(ctx, "cat.json", []byte("v1"), "")
	if err != nil {
		t.Fatal(err)
	}
	pv, err := b.prepareBytes(ctx, "cat.json", []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteIfVersion(ctx, "cat.json", []byte("theirs"), v1); err != nil {
		t.Fatal(err)
	}
	if _, err := pv.CommitIfVersion(ctx, v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("commit over a changed object: %v, want ErrConflict", err)
	}
	if err := pv.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := b.ReadVersion(ctx, "cat.json"); string(data) != "theirs" {
		t.Fatalf("object = %q, want the other writer's", data)
	}
	entries, err := os.ReadDir(b.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), catalog.TempPrefix) {
			t.Fatalf("temp file %s left behind", e.Name())
		}
	}
}
