package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// TestExitCodeFollowsClassify: the CLI exits as service.Classify says (a
// lease lost to another run is refused like a held one), and cobra's own
// usage errors exit 2.
func TestExitCodeFollowsClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w: lock on /r was taken over", lease.ErrLost), exitRefused},
		{fmt.Errorf("%w: /r is held by host-1", lease.ErrHeld), exitRefused},
		{fmt.Errorf("latest (/r) is not locked with id x: %w", lease.ErrWrongID), exitRefused},
		{fmt.Errorf("put a: %w", storage.ErrDenied), exitFailed},
		{fmt.Errorf("not every destination succeeded: %w", storage.ErrUnavailable), exitFailed},
		{errors.New(`unknown flag: --nope`), exitUsage},
		{withCode(exitDamaged, errors.New("verify found damage")), exitDamaged},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}
