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
		if tuneGC(env, gcSmallHeap) != nil {
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
	// The bound sits above what the test binary holds already.
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	bound := s[0].Value.Uint64() + 4<<20
	tuner := tuneGC(func(string) string { return "" }, bound)
	if tuner == nil {
		t.Fatal("no policy with an empty environment")
	}
	// Below the bound the policy stays through collections.
	for range 3 {
		runtime.GC()
	}
	if got := debug.SetGCPercent(gcSmallPercent); got != gcSmallPercent || tuner.restored.Load() {
		t.Fatalf("GC percent %d (restored %v) on a small heap, want %d", got, tuner.restored.Load(), gcSmallPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != int64(bound)*gcLimitFactor {
		t.Fatalf("memory limit %d, want %d", got, bound*gcLimitFactor)
	}
	live := make([][]byte, 0, 16)
	for range 16 {
		live = append(live, make([]byte, 1<<20))
	}
	// The finalizer runs on its own goroutine after a cycle: collect until
	// it has, a bounded number of times.
	for i := 0; i < 100 && !tuner.restored.Load(); i++ {
		runtime.GC()
		runtime.Gosched()
	}
	runtime.KeepAlive(live)
	if !tuner.restored.Load() {
		t.Fatal("live heap past the bound, policy still in force")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d after the bound, want 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d after the bound, want none", got)
	}
}
