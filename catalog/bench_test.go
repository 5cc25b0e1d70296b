package catalog_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
)

// benchSizes are the catalog sizes of the codec benchmarks; the million is
// left out with -short.
func benchSizes(b *testing.B) []int {
	if testing.Short() {
		return []int{10_000, 100_000}
	}
	return []int{10_000, 100_000, 1_000_000}
}

// benchCat is a catalog of n source records as a root accumulates them:
// outputs of a few owners, published by a few hundred bundles.
func benchCat(n int) *catalog.Catalog {
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	c := &catalog.Catalog{DistributorVersion: "dev", CreatedAt: now, UpdatedAt: now}
	c.Outputs = make([]catalog.Output, 0, n)
	for i := range n {
		bundle := i / 5000
		at := now.Add(time.Duration(bundle) * time.Minute)
		src := catalog.Source{ID: fmt.Sprintf("weatherreporter.run%04d", bundle), Digest: fmt.Sprintf("sha256:%064x", bundle), Created: at}
		c.Outputs = append(c.Outputs, catalog.Output{Path: fmt.Sprintf("dir%02d/file%07d.bin", i%50, i),
			PipelineID: fmt.Sprintf("weatherreporter.p%d", i%4), DestinationID: "latest-html", Source: src, Kind: catalog.KindSource,
			SHA256: fmt.Sprintf("sha256:%064x", i), Size: 4096, CreatedAt: at, UpdatedAt: at})
	}
	c.Sort()
	return c
}

func benchCatalog(b *testing.B, n int) []byte {
	data, err := catalog.Marshal(benchCat(n))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkParse reads a catalog as every publication does.
func BenchmarkParse(b *testing.B) {
	for _, n := range benchSizes(b) {
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

// BenchmarkMarshal writes a catalog as every publication does.
func BenchmarkMarshal(b *testing.B) {
	for _, n := range benchSizes(b) {
		c := benchCat(n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				data, err := catalog.Marshal(c)
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.SetBytes(int64(size))
		})
	}
}

// BenchmarkMarshalSuccessor writes the catalog after a publication that
// adds 10 records to one read with ParseOwned (what the engine commits).
func BenchmarkMarshalSuccessor(b *testing.B) {
	for _, n := range benchSizes(b) {
		data := benchCatalog(b, n)
		cur, _, err := catalog.ParseOwned(data)
		if err != nil {
			b.Fatal(err)
		}
		next := successorAdding10(cur)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := catalog.Marshal(next); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(data)))
		})
	}
}

// BenchmarkParseOwned reads a catalog as the engine does.
func BenchmarkParseOwned(b *testing.B) {
	for _, n := range benchSizes(b) {
		data := benchCatalog(b, n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := catalog.ParseOwned(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMarshalTo streams a catalog whose every record changed (a
// republish of a newer bundle updates them all) as the engine commits a
// large one: encoded on up to four goroutines.
func BenchmarkMarshalTo(b *testing.B) {
	for _, n := range benchSizes(b) {
		c := benchCat(n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var w countingDiscard
			for b.Loop() {
				w = 0
				if err := catalog.MarshalTo(&w, c); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(w))
		})
	}
}

// countingDiscard counts the bytes written to it.
type countingDiscard int

func (d *countingDiscard) Write(p []byte) (int, error) {
	*d += countingDiscard(len(p))
	return len(p), nil
}

// BenchmarkScan reads a catalog record by record, as a publication to a
// large root does, keeping none.
func BenchmarkScan(b *testing.B) {
	for _, n := range benchSizes(b) {
		data := benchCatalog(b, n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				seen := 0
				_, err := catalog.Scan(bytes.NewReader(data), -1, func(*catalog.Record) error { seen++; return nil })
				if err != nil || seen != n {
					b.Fatalf("scan: %v", err)
				}
			}
		})
	}
}

// BenchmarkMerge writes the catalog after a publication of ten new
// records, as a publication to a large root does.
func BenchmarkMerge(b *testing.B) {
	for _, n := range benchSizes(b) {
		cur := benchCat(n)
		data, err := catalog.Marshal(cur)
		if err != nil {
			b.Fatal(err)
		}
		next := successorAdding10(cur)
		var added []catalog.Output
		for _, o := range next.Outputs {
			if _, ok := cur.Lookup(o.Path); !ok {
				added = append(added, o)
			}
		}
		part := cur.Successor()
		part.Outputs = added
		lay := layoutOf(b, data)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := catalog.Merge(io.Discard, bytes.NewReader(data), lay, part, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
