package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/distributor/distributor/storage"
)

// TestClassifyOSErrors: errors that describe the root's file system map to
// the storage sentinels, keep the OS error and say what to do; others pass
// unchanged.
func TestClassifyOSErrors(t *testing.T) {
	t.Parallel()
	const root = "/srv/site"
	for _, tc := range []struct {
		errno syscall.Errno
		kind  error // nil: unchanged
		hint  string
	}{
		{syscall.ENOSPC, storage.ErrUnavailable, "/srv/site is full (no space or quota left): free space there; serve retries with back-off"},
		{syscall.EDQUOT, storage.ErrUnavailable, "/srv/site is full (no space or quota left): free space there; serve retries with back-off"},
		{syscall.EIO, storage.ErrUnavailable, "I/O error under /srv/site: check the disk; serve retries with back-off"},
		{syscall.EAGAIN, storage.ErrUnavailable, "/srv/site is busy or timed out; serve retries with back-off"},
		{syscall.EBUSY, storage.ErrUnavailable, "/srv/site is busy or timed out; serve retries with back-off"},
		{syscall.ETIMEDOUT, storage.ErrUnavailable, "/srv/site is busy or timed out; serve retries with back-off"},
		{syscall.EACCES, storage.ErrDenied, "no permission in /srv/site: fix the permissions so that the user distributor runs as can read and write there"},
		{syscall.EPERM, storage.ErrDenied, "no permission in /srv/site: fix the permissions so that the user distributor runs as can read and write there"},
		{syscall.EROFS, storage.ErrDenied, "/srv/site is on a read-only file system: remount it read-write"},
		{syscall.ENOENT, nil, ""},
		{syscall.ENOTDIR, nil, ""},
		{syscall.EEXIST, nil, ""},
	} {
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

// TestReadOnlyRootIsDenied: writing into a folder distributor may not
// write is ErrDenied, naming the root and the fix; reading still works.
// Root ignores permissions, so this runs only as another user (the
// mapping itself is TestClassifyOSErrors).
func TestReadOnlyRootIsDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("running as root: permissions are not enforced")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/a.txt", []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, err = b.Put(t.Context(), "b.txt", strings.NewReader("b\n"), 2, storage.PutOptions{})
	if !errors.Is(err, storage.ErrDenied) || !errors.Is(err, fs.ErrPermission) ||
		!strings.HasSuffix(err.Error(), "no permission in "+dir+": fix the permissions so that the user distributor runs as can read and write there") {
		t.Fatalf("put into a read-only root: %v", err)
	}
	if _, err := b.Stat(t.Context(), "a.txt"); err != nil {
		t.Fatalf("stat in a read-only root: %v", err)
	}
}
