package planner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// benchInput is a root holding n records of one owner and a publication
// that changes 1% of them.
func benchInput(n int) planner.Input {
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	owner := catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"}
	src := catalog.Source{ID: "weatherreporter.tomorrow", Digest: "sha256:" + fmt.Sprintf("%064x", 1), Created: now}
	cat := &catalog.Catalog{CreatedAt: now, UpdatedAt: now}
	stored := make(map[string]planner.Stored, n)
	desired := make([]planner.Desired, 0, n)
	for i := range n {
		p := fmt.Sprintf("dir%02d/file%06d.bin", i%50, i)
		sum := fmt.Sprintf("sha256:%064x", i)
		cat.Outputs = append(cat.Outputs, catalog.Output{Path: p, PipelineID: owner.PipelineID, DestinationID: owner.DestinationID,
			Source: src, Kind: catalog.KindSource, SHA256: sum, Size: 4096, CreatedAt: now, UpdatedAt: now})
		stored[p] = planner.Stored{Size: 4096}
		if i%100 == 0 {
			sum = fmt.Sprintf("sha256:%064x", i+n)
		}
		desired = append(desired, planner.Desired{Path: p, From: p, Kind: catalog.KindSource, SHA256: sum, Size: 4096})
	}
	cat.Sort()
	return planner.Input{Owner: owner, Source: src, Workflow: planner.Replacement, Desired: desired,
		Catalog: cat, Stored: stored, Now: now.Add(time.Hour)}
}

// benchSizes are the catalog sizes benchmarked; the million is left out
// with -short.
func benchSizes() []int {
	if testing.Short() {
		return []int{10_000, 100_000}
	}
	return []int{10_000, 100_000, 1_000_000}
}

// BenchmarkBuild: a republish of all n outputs, 1 % changed.
func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes() {
		in := benchInput(n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := planner.Build(in)
				if err != nil || len(p.Writes()) != n/100 {
					b.Fatalf("plan: %v, %d writes", err, len(p.Writes()))
				}
			}
		})
	}
}

// BenchmarkBuildAdd10: another owner adds 10 outputs to a root of n
// records, knowing only its own paths' storage facts.
func BenchmarkBuildAdd10(b *testing.B) {
	for _, n := range benchSizes() {
		in := benchInput(n)
		in.Owner = catalog.Owner{PipelineID: "tides.daily", DestinationID: "latest-html"}
		in.Source.ID = "tides.tomorrow"
		in.Workflow = planner.Additive
		in.Stored = map[string]planner.Stored{}
		in.Desired = nil
		for i := range 10 {
			p := fmt.Sprintf("tides/file%02d.bin", i)
			in.Desired = append(in.Desired, planner.Desired{Path: p, From: p, Kind: catalog.KindSource, SHA256: fmt.Sprintf("sha256:%064x", i), Size: 4096})
		}
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := planner.Build(in)
				if err != nil || len(p.Writes()) != 10 || len(p.Next.Outputs) != n+10 {
					b.Fatalf("plan: %v, %d writes", err, len(p.Writes()))
				}
			}
		})
	}
}

func BenchmarkMarshalCatalog(b *testing.B) {
	in := benchInput(100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := catalog.Marshal(in.Catalog); err != nil {
			b.Fatal(err)
		}
	}
}
