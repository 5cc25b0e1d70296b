package bundle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
)

func benchManifest(b *testing.B, n int) []byte {
	m := bundle.Manifest{SchemaVersion: bundle.SchemaVersion, ID: "bench.source", Created: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)}
	for i := range n {
		m.Files = append(m.Files, bundle.File{Path: fmt.Sprintf("dir%02d/file%07d.bin", i%50, i), SHA256: fmt.Sprintf("sha256:%064x", i), Size: 4096})
	}
	data, err := m.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkParseManifest reads a manifest as every publication does.
func BenchmarkParseManifest(b *testing.B) {
	sizes := []int{10_000, 200_000}
	if !testing.Short() {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		data := benchManifest(b, n)
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := bundle.ParseManifest(data)
				if err != nil || len(m.Files) != n {
					b.Fatalf("parse: %v", err)
				}
			}
		})
	}
}
