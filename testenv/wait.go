package testenv

import (
	"testing"
	"time"
)

// tick is how often Eventually checks: short, so that a test goes on as
// soon as what it waits for has happened.
const tick = 10 * time.Millisecond

// Eventually checks cond every few milliseconds until it holds, and fails
// the test naming what (a format with args) if it does not within timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for "+what, append([]any{timeout}, args...)...)
		}
		time.Sleep(tick)
	}
}
