package local

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// classifyCase is an OS error and what Classify makes of it: the kind it
// wraps and the hint it adds (nil: unchanged). The system's own error
// numbers are in classifyCases (oserr_unix_test.go,
// oserr_windows_test.go).
type classifyCase struct {
	errno syscall.Errno
	kind  error
	hint  string
}

// The hints, for the root "/srv/site".
const (
	hintFull     = "/srv/site is full (no space or quota left): free space there; serve retries with back-off"
	hintIO       = "I/O error under /srv/site: check the disk; serve retries with back-off"
	hintBusy     = "/srv/site is busy or timed out; serve retries with back-off"
	hintDenied   = "no permission in /srv/site: fix the permissions so that the user distributor runs as can read and write there"
	hintReadOnly = "/srv/site is on a read-only file system: remount it read-write"
)

// TestClassifyOSErrors: errors that describe the root's file system map to
// the storage sentinels, keep the OS error and say what to do; others pass
// unchanged.
func TestClassifyOSErrors(t *testing.T) {
	t.Parallel()
	const root = "/srv/site"
	for _, tc := range classifyCases {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			in := fmt.Errorf("put %q in %s: %w", "a.txt", root, &fs.PathError{Op: "open", Path: ".distributor/tmp/x", Err: tc.errno})
			got := Classify(root, in)
			if tc.kind == nil {
				if got != in {
					t.Fatalf("classify changed %v into %v", in, got)
				}
				return
			}
			if !errors.Is(got, tc.kind) || !errors.Is(got, tc.errno) {
				t.Fatalf("%v: want it to match %v and %v", got, tc.kind, tc.errno)
			}
			if want := in.Error() + ": " + tc.hint; got.Error() != want {
				t.Fatalf("message\n got %s\nwant %s", got, want)
			}
			if again := Classify(root, got); again != got {
				t.Fatalf("classified twice: %v", again)
			}
		})
	}
	if Classify(root, nil) != nil {
		t.Fatal("nil must stay nil")
	}
}
