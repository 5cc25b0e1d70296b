package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// resetGC puts the runtime's defaults back after a test of the policy.
func resetGC(t *testing.T) {
	t.Cleanup(func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	})
}

func TestTuneGCLeavesTheUsersSettings(t *testing.T) {
	resetGC(t)
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		env := func(k string) string {
			if k == name {
				return "200"
			}
			return ""
		}
		if tuneGC(env, gcSmallHeap, gcMediumHeap) != nil {
			t.Fatalf("%s set: the policy applied", name)
		}
		if got := debug.SetGCPercent(100); got != 100 {
			t.Fatalf("%s set: GC percent %d, want the untouched 100", name, got)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Fatalf("%s set: memory limit %d, want none", name, got)
		}
	}
}

func TestTuneGCRevertsPastTheBound(t *testing.T) {
	resetGC(t)
	// The bounds sit above what the test binary holds already.
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	small := s[0].Value.Uint64() + 4<<20
	medium := small + 16<<20
	// Until the first collection only the memory limit starts one. (The
	// knobs are read before the tuner is armed: a collection the limit
	// sets off in this test binary would move it on meanwhile.)
	tuner := startGCTuner(small, medium)
	wantKnobs(t, "before the first collection", -1, int64(small)*gcFirstFactor)
	tuner.arm()

	// collectUntil collects until done holds: the finalizer runs on its
	// own goroutine after a cycle.
	collectUntil := func(done func() bool) {
		for i := 0; i < 100 && !done(); i++ {
			runtime.GC()
			runtime.Gosched()
		}
	}
	// After it, below the bound, the small policy stays through collections.
	collectUntil(func() bool { return gcPercent() == gcSmallPercent })
	for range 3 {
		runtime.GC()
	}
	wantKnobs(t, "a small heap", gcSmallPercent, int64(small)*gcLimitFactor)
	if tuner.restored.Load() {
		t.Fatal("restored on a small heap")
	}
	live := make([][]byte, 0, 64)
	for range 8 {
		live = append(live, make([]byte, 1<<20))
	}
	collectUntil(func() bool { return gcPercent() == gcMediumPercent })
	wantKnobs(t, "past the small bound", gcMediumPercent, int64(medium)*gcLimitFactor)
	if tuner.restored.Load() {
		t.Fatal("restored past the small bound only")
	}
	for range 24 {
		live = append(live, make([]byte, 1<<20))
	}
	collectUntil(tuner.restored.Load)
	runtime.KeepAlive(live)
	if !tuner.restored.Load() {
		t.Fatal("live heap past the medium bound, policy still in force")
	}
	wantKnobs(t, "past the medium bound", 100, math.MaxInt64)
}

// gcPercent reads the GC percent in force.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// wantKnobs checks the GC percent and memory limit in force.
func wantKnobs(t *testing.T, when string, percent int, limit int64) {
	t.Helper()
	if got := gcPercent(); got != percent {
		t.Fatalf("%s: GC percent %d, want %d", when, got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("%s: memory limit %d, want %d", when, got, limit)
	}
}
