package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/storage/storagetest"
	"github.com/distributor/distributor/testenv"
)

// A catalog that cannot wait in a temporary file (TMPDIR is missing)
// waits in memory, is committed whole, and says so once, naming the
// catalog, the folder and the fix. Not parallel: it sets TMPDIR.
func TestCatalogHeldInMemoryIsSaidOnce(t *testing.T) {
	env := testenv.NewS3(t)
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("TMPDIR", missing)
	var mu sync.Mutex
	var warned []error
	b := newBackend(t, env.Client, env.Bucket(t), "dest/root", s3store.Options{CatalogInMemory: 1, Warn: func(_ context.Context, err error) {
		mu.Lock()
		defer mu.Unlock()
		warned = append(warned, err)
	}})
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	next := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at}
	for i := range 200 {
		next.Outputs = append(next.Outputs, catalog.Output{Path: fmt.Sprintf("d/f%04d.txt", i), PipelineID: "p", DestinationID: "site",
			Source: catalog.Source{ID: "s", Digest: "sha256:" + strings.Repeat("b", 64), Created: at}, Kind: catalog.KindSource,
			SHA256: "sha256:" + strings.Repeat("a", 64), Size: 1, CreatedAt: at, UpdatedAt: at})
	}
	want, err := catalog.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	pc := b.PrepareCatalog(t.Context(), storagetest.CatalogDocument(next), 0)
	if _, err := pc.Commit(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := b.Open(t.Context(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("committed %d bytes, %v; want the %d encoded", len(got), err, len(want))
	}
	if len(warned) != 1 {
		t.Fatalf("warned %d times (%v), want once", len(warned), warned)
	}
	var inMemory *s3store.InMemoryError
	if !errors.As(warned[0], &inMemory) {
		t.Fatalf("warned %T (%v), want an *InMemoryError", warned[0], warned[0])
	}
	for _, part := range []string{b.String() + catalog.FileName, "in " + missing, "set TMPDIR"} {
		if !strings.Contains(warned[0].Error(), part) {
			t.Errorf("the warning %q does not name %q", warned[0], part)
		}
	}
}
