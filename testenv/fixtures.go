package testenv

import (
	"context"
	"embed"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
)

// WriteFiles writes files (slash paths relative to dir → content) under
// dir, creating folders as needed.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteBundle writes files into dir and a manifest for source id created
// at created, as a producer does, and returns the manifest's digest.
func WriteBundle(t testing.TB, dir, id string, created time.Time, files map[string]string) (digest string) {
	t.Helper()
	WriteFiles(t, dir, files)
	_, data, err := bundle.Create(context.Background(), dir, id, created)
	if err != nil {
		t.Fatal(err)
	}
	return bundle.Digest(data)
}

//go:embed testdata/catalogs/*.json
var catalogs embed.FS

// Catalog fixtures, in testdata/catalogs: catalogs earlier versions wrote
// (which distributor must read and upgrade) and the v4 reference example.
const (
	LegacyV2SingleOwner = "legacy-v2-single-owner.json"
	LegacyV3SharedRoot  = "legacy-v3-shared-root.json"
	SeedExample         = "seed-example.json"
)

// CatalogFixture returns the bytes of the catalog fixture name.
func CatalogFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := catalogs.ReadFile("testdata/catalogs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// CatalogFixtureNames lists every catalog fixture, sorted.
func CatalogFixtureNames(t testing.TB) []string {
	t.Helper()
	names, err := fs.Glob(catalogs, "testdata/catalogs/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no catalog fixtures: %v", err)
	}
	for i, n := range names {
		names[i] = path.Base(n)
	}
	return names
}
