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

// Retry calls op until it returns nil and fails the test with op's last
// error if it has not succeeded within timeout. It is for idempotent setup
// that a freshly started or failing-over cluster may refuse for a moment
// (placing a replicated stream, bucket or durable).
func Retry(t testing.TB, timeout time.Duration, op func() error, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s on "+what+": %v", append(append([]any{timeout}, args...), err)...)
		}
		time.Sleep(retryPause)
	}
}

// retryPause spaces Retry's attempts: a failed JetStream API call has
// already waited for its own timeout, and a short pause keeps a busy
// cluster from being flooded with requests.
const retryPause = 100 * time.Millisecond
