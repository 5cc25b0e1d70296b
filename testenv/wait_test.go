package testenv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/testenv"
)

// TestRetry: an operation that fails is called again until it succeeds,
// and Retry returns then, not at the timeout.
func TestRetry(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	testenv.Retry(t, time.Minute, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}, "the third call")
	if calls != 3 {
		t.Fatalf("op called %d times, want 3", calls)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Retry took %s, want it to return at the first success", took)
	}
}
