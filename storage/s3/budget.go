package s3

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Budget is upload memory that Backends share: every Backend given the same
// Budget (Options.Budget) takes its part buffers and single-request bodies
// from it, and its staged small objects from its quarter beside it. One
// Budget per process (stores.Opener makes one) bounds the upload memory of
// all its workers and destinations together, so raising the worker count
// or adding destinations does not multiply it; a caller waits for room.
type Budget struct {
	size    int64
	buffers *semaphore.Weighted

	// stage holds small staged objects until their commit (size/4, beside
	// the budget, so a Put never waits on them).
	stage *semaphore.Weighted

	// held and peak count the bytes taken from buffers and stage together
	// (tests and operators check the bound).
	held, peak atomic.Int64
}

// NewBudget returns a budget of bytes for part buffers and single-request
// bodies, and bytes/4 beside it for staged small objects (0: the default
// 64 MiB).
func NewBudget(bytes int64) *Budget {
	if bytes <= 0 {
		bytes = defaultMemoryBudget
	}
	return &Budget{size: bytes, buffers: semaphore.NewWeighted(bytes), stage: semaphore.NewWeighted(bytes / 4)}
}

// Size is the budget for part buffers and single-request bodies; staged
// small objects have Size/4 more.
func (b *Budget) Size() int64 { return b.size }

// Peak is the most bytes held at once so far, staged small objects
// included: at most Size + Size/4.
func (b *Budget) Peak() int64 { return b.peak.Load() }

func (b *Budget) acquire(ctx context.Context, n int64) error {
	if err := b.buffers.Acquire(ctx, n); err != nil {
		return err
	}
	b.took(n)
	return nil
}

func (b *Budget) release(n int64) {
	b.held.Add(-n)
	b.buffers.Release(n)
}

func (b *Budget) tryStage(n int64) bool {
	if !b.stage.TryAcquire(n) {
		return false
	}
	b.took(n)
	return true
}

func (b *Budget) releaseStage(n int64) {
	b.held.Add(-n)
	b.stage.Release(n)
}

func (b *Budget) took(n int64) {
	h := b.held.Add(n)
	for p := b.peak.Load(); h > p && !b.peak.CompareAndSwap(p, h); p = b.peak.Load() {
	}
}
