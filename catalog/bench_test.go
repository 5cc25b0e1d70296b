package catalog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
)

// benchCatalog is the written form of a catalog with n source records.
func benchCatalog(b *testing.B, n int) []byte {
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	src := catalog.Source{ID: "weatherreporter.tomorrow", Digest: fmt.Sprintf("sha256:%064x", 1), Created: now}
	c := &catalog.Catalog{DistributorVersion: "dev", CreatedAt: now, UpdatedAt: now}
	for i := range n {
		c.Outputs = append(c.Outputs, catalog.Output{Path: fmt.Sprintf("dir%02d/file%06d.bin", i%50, i),
			PipelineID: "weatherreporter.daily", DestinationID: "latest-html", Source: src, Kind: catalog.KindSource,
			SHA256: fmt.Sprintf("sha256:%064x", i), Size: 4096, CreatedAt: now, UpdatedAt: now})
	}
	data, err := catalog.Marshal(c)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkParse reads a catalog as every publication does.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		data := benchCatalog(b, n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				c, _, err := catalog.Parse(data)
				if err != nil || len(c.Outputs) != n {
					b.Fatalf("parse: %v", err)
				}
			}
		})
	}
}
