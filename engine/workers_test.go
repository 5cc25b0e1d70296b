package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// forEach runs every index exactly once, on no more workers than asked
// for or than there is work, and stops handing out work after a failure.
func TestForEach(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ workers, n, wantMax int }{
		{4, 100, 4}, {4, 2, 2}, {1, 10, 1}, {0, 10, 4}, {4, 0, 0},
	} {
		e := &Engine{Workers: tc.workers}
		var (
			mu         sync.Mutex
			seen       = map[int]int{}
			running    atomic.Int32
			maxRunning int32
		)
		err := e.forEach(t.Context(), tc.n, func(_ context.Context, i int) error {
			r := running.Add(1)
			defer running.Add(-1)
			mu.Lock()
			defer mu.Unlock()
			seen[i]++
			maxRunning = max(maxRunning, r)
			return nil
		})
		if err != nil || len(seen) != tc.n {
			t.Errorf("workers %d, n %d: err %v, %d indexes run", tc.workers, tc.n, err, len(seen))
		}
		for i, c := range seen {
			if c != 1 || i < 0 || i >= tc.n {
				t.Errorf("workers %d, n %d: index %d ran %d times", tc.workers, tc.n, i, c)
			}
		}
		if int(maxRunning) > tc.wantMax {
			t.Errorf("workers %d, n %d: %d ran at once, want at most %d", tc.workers, tc.n, maxRunning, tc.wantMax)
		}
	}

	boom := errors.New("boom")
	var ran atomic.Int32
	err := (&Engine{Workers: 1}).forEach(t.Context(), 10, func(_ context.Context, i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() != 4 {
		t.Errorf("after a failure at index 3: err %v, %d ran; want boom and 4", err, ran.Load())
	}
}
