package testenv

import (
	"flag"
	"testing"
)

// TestBenchmarkRunsKeepTheDisk: a run with -bench is a measurement of the
// disk the product writes to, so Main keeps its temporary folders there.
// Not parallel: it sets a flag of the test binary.
func TestBenchmarkRunsKeepTheDisk(t *testing.T) {
	f := flag.Lookup("test.bench")
	if f == nil {
		t.Fatal("no -test.bench flag in a test binary")
	}
	old := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.bench", old) })
	for _, c := range []struct {
		bench string
		want  bool
	}{{"", false}, {".", true}, {"Throughput", true}} {
		if err := flag.Set("test.bench", c.bench); err != nil {
			t.Fatal(err)
		}
		if got := benchmarking(); got != c.want {
			t.Errorf("-bench %q: benchmarking() = %v, want %v", c.bench, got, c.want)
		}
	}
}
