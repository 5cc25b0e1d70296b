//go:build unix

package local

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/distributor/distributor/storage"
)

var classifyCases = []classifyCase{
	{syscall.ENOSPC, storage.ErrUnavailable, hintFull},
	{syscall.EDQUOT, storage.ErrUnavailable, hintFull},
	{syscall.EIO, storage.ErrUnavailable, hintIO},
	{syscall.EAGAIN, storage.ErrUnavailable, hintBusy},
	{syscall.EBUSY, storage.ErrUnavailable, hintBusy},
	{syscall.ETIMEDOUT, storage.ErrUnavailable, hintBusy},
	{syscall.EACCES, storage.ErrDenied, hintDenied},
	{syscall.EPERM, storage.ErrDenied, hintDenied},
	{syscall.EROFS, storage.ErrDenied, hintReadOnly},
	{syscall.ENOENT, nil, ""},
	{syscall.ENOTDIR, nil, ""},
	{syscall.EEXIST, nil, ""},
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
	eachImpl(t, readOnlyRootIsDenied)
}

func readOnlyRootIsDenied(t *testing.T, ti testImpl) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/a.txt", []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := ti.at(t, dir)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, err := b.Put(t.Context(), "b.txt", strings.NewReader("b\n"), 2, storage.PutOptions{})
	if !errors.Is(err, storage.ErrDenied) || !errors.Is(err, fs.ErrPermission) ||
		!strings.HasSuffix(err.Error(), "no permission in "+dir+": fix the permissions so that the user distributor runs as can read and write there") {
		t.Fatalf("put into a read-only root: %v", err)
	}
	if _, err := b.Stat(t.Context(), "a.txt"); err != nil {
		t.Fatalf("stat in a read-only root: %v", err)
	}
}
