package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// GC policy of the command. A run over many small files allocates a little
// per file (paths, records, buffers) on a small live heap, and at the
// default GOGC=100 the collector ran every few megabytes: 10–15 % of a
// first publication's CPU. The first collection waits until the heap
// reaches a memory limit (gcFirstFactor times the small bound): a
// publication to a root of some thousands of outputs, local or S3 (whose
// client and encoded catalog take some 20 MB more), ends before it, and
// a collection while it runs costs more than its scan (write barriers,
// and the catalog's fresh records scanned before they are written, which
// makes the kernel map each of their pages twice). After that collection,
// while the live heap is small, the collector runs less often (GOGC 400: the heap may grow to five times the live one, at
// most ~160 MB at the bound below). A live heap of a medium catalog
// (100,000 records: ~50 MB once read) is collected at GOGC 200: at the
// default, the collection that the next catalog's allocation sets off runs
// beside the plan and its merge (write barriers, a core scanning the
// heap) and slows a small publication for no lower peak.
// Past the medium bound it reverts to the default, so a million-output
// catalog (over a gigabyte live) is collected as usual. Between two
// collections the heap can grow far past a bound (a catalog read), so a
// memory limit caps it meanwhile: reaching it collects early, and the
// check after that collection moves on. A GOGC or GOMEMLIMIT the user set
// is left alone.
const (
	gcFirstFactor   = 3 // memory limit until the first collection: this many times the small bound
	gcSmallPercent  = 400
	gcSmallHeap     = 32 << 20 // live heap above which the medium policy applies
	gcMediumPercent = 200
	gcMediumHeap    = 256 << 20 // live heap above which the default applies again
	gcLimitFactor   = 4         // memory limit while tuned: this many times the bound
)

// gcTuner holds the policy in force; the runtime knobs it sets are the
// process's own.
type gcTuner struct {
	small    uint64 // live-heap bytes above which the medium policy applies
	medium   uint64 // live-heap bytes above which the default is restored
	inSmall  bool   // only check touches it, from the one finalizer in flight
	inMedium bool   // likewise
	restored atomic.Bool
	sample   []metrics.Sample
}

// tuneGC applies the policy unless the environment (getenv) sets GOGC or
// GOMEMLIMIT; it returns nil then.
func tuneGC(getenv func(string) string, small, medium uint64) *gcTuner {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return nil
	}
	t := startGCTuner(small, medium)
	t.arm()
	return t
}

// startGCTuner puts the policy until the first collection in force; until
// arm, nothing changes it.
func startGCTuner(small, medium uint64) *gcTuner {
	t := &gcTuner{small: small, medium: medium, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(int64(small) * gcFirstFactor)
	return t
}

// arm asks to be called after the next collection: the finalizer of an
// object nothing references runs once per cycle that finds it dead.
func (t *gcTuner) arm() {
	// Not a tiny allocation (under 16 bytes without pointers): those
	// share a block, and their finalizers may never run.
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) { t.check() })
}

// check moves from the first collection's limit to the small policy, to
// the medium policy once the live heap passes the small bound, restores
// the default once it passes the medium one, and otherwise waits for the
// next collection.
func (t *gcTuner) check() {
	if t.restored.Load() {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		t.arm()
		return
	}
	switch live := t.sample[0].Value.Uint64(); {
	case live > t.medium:
		t.restore()
		return
	case live > t.small && !t.inMedium:
		t.inMedium = true
		debug.SetGCPercent(gcMediumPercent)
		debug.SetMemoryLimit(int64(t.medium) * gcLimitFactor)
	case live <= t.small && !t.inSmall && !t.inMedium:
		t.inSmall = true
		debug.SetGCPercent(gcSmallPercent)
		debug.SetMemoryLimit(int64(t.small) * gcLimitFactor)
	}
	t.arm()
}

type gcSentinel struct{ _ [32]byte }

// restore puts the runtime's defaults back (GOGC=100, no memory limit) and
// stops checking. Only check calls it, from the one finalizer in flight.
func (t *gcTuner) restore() {
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	t.restored.Store(true) // after: a reader that sees it sees the defaults
}
