package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/distributor/distributor/storage"
)

// BenchmarkList lists a root of 10,000 files in 50 folders, the shape of
// the republish benchmark's roots.
func BenchmarkList(b *testing.B) {
	dir := b.TempDir()
	for d := range 50 {
		sub := filepath.Join(dir, fmt.Sprintf("dir%02d", d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 200 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%06d.bin", d*200+f)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	root, err := New(dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := root.List(ctx, "", func(storage.ObjectInfo) error { n++; return nil }); err != nil || n != 10_000 {
			b.Fatalf("listed %d, %v", n, err)
		}
	}
}
