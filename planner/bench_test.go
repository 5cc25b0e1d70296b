package planner_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
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

// benchLoop runs f as the benchmark's loop and reports the process's CPU
// time per op (user + system, the GC's included) beside the wall time: on
// the shared two-core machine the wall time swings with the load, the CPU
// time much less.
func benchLoop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, err := testenv.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return d
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
			benchLoop(b, func() {
				p, err := planner.Build(in)
				if err != nil || len(p.Writes()) != n/100 {
					b.Fatalf("plan: %v, %d writes", err, len(p.Writes()))
				}
			})
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
			benchLoop(b, func() {
				p, err := planner.Build(in)
				if err != nil || len(p.Writes()) != 10 || len(p.Next.Outputs) != n+10 {
					b.Fatalf("plan: %v, %d writes", err, len(p.Writes()))
				}
			})
		})
	}
}

// manifestInput is benchInput as the engine hands it over: the desired
// outputs in a manifest's (path) order and the catalog read by
// catalog.ParseOwned.
func manifestInput(b *testing.B, n int) planner.Input {
	in := benchInput(n)
	slices.SortFunc(in.Desired, func(x, y planner.Desired) int { return strings.Compare(x.Path, y.Path) })
	data, err := catalog.Marshal(in.Catalog)
	if err != nil {
		b.Fatal(err)
	}
	if in.Catalog, _, err = catalog.ParseOwned(data); err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkBuildManifest: BenchmarkBuild's republish (1 % changed) and a
// replacement removing 10 %, on the engine's inputs (manifestInput).
func BenchmarkBuildManifest(b *testing.B) {
	for _, n := range benchSizes() {
		in := manifestInput(b, n)
		b.Run(fmt.Sprintf("republish/records=%d", n), func(b *testing.B) {
			benchLoop(b, func() {
				p, err := planner.Build(in)
				if err != nil || len(p.Writes()) != n/100 {
					b.Fatalf("plan: %v, %d writes", err, len(p.Writes()))
				}
			})
		})
		removed := in
		removed.Desired = nil
		for i, d := range in.Desired {
			if i%10 != 5 {
				removed.Desired = append(removed.Desired, d)
			}
		}
		b.Run(fmt.Sprintf("remove10/records=%d", n), func(b *testing.B) {
			benchLoop(b, func() {
				p, err := planner.Build(removed)
				if err != nil || len(p.Deletes()) != n/10 {
					b.Fatalf("plan: %v, %d deletes", err, len(p.Deletes()))
				}
			})
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
