package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/distributor/distributor/storage"
)

func TestNewOnAMissingRootIsErrRootMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := New(filepath.Join(dir, "missing")); !errors.Is(err, storage.ErrRootMissing) {
		t.Fatalf("New(missing) = %v, want ErrRootMissing", err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	if _, err := New(filepath.Join(dir, "file")); !errors.Is(err, storage.ErrRootMissing) {
		t.Fatalf("New(file) = %v, want ErrRootMissing", err)
	}
}

// TestCheckRoot swaps the folder a backend's path names in every way an
// operator can and checks what CheckRoot says, by device and inode.
func TestCheckRoot(t *testing.T) {
	t.Parallel()
	eachImpl(t, checkRoot)
}

func checkRoot(t *testing.T, ti testImpl) {
	missing := func(root string) string {
		return "destination root " + root + " does not exist (moved or deleted?): recreate the folder or fix the destination's path"
	}
	changed := func(root string) string {
		return "destination root " + root + ": the root path now names another folder than the one opened (moved away and replaced, or a re-pointed link)"
	}
	for _, tc := range []struct {
		name string
		// link opens the backend on a symlink to the folder.
		link bool
		swap func(t *testing.T, path, target string)
		is   error
		msg  func(root string) string
	}{
		{name: "untouched", swap: func(*testing.T, string, string) {}},
		{name: "moved", swap: func(t *testing.T, path, _ string) {
			must(t, os.Rename(path, path+".old"))
		}, is: storage.ErrRootMissing, msg: missing},
		{name: "moved and replaced", swap: func(t *testing.T, path, _ string) {
			must(t, os.Rename(path, path+".old"))
			must(t, os.Mkdir(path, 0o755))
		}, is: storage.ErrRootChanged, msg: changed},
		{name: "deleted", swap: func(t *testing.T, path, _ string) {
			must(t, os.RemoveAll(path))
		}, is: storage.ErrRootMissing, msg: missing},
		{name: "deleted and recreated", swap: func(t *testing.T, path, _ string) {
			must(t, os.RemoveAll(path))
			must(t, os.Mkdir(path, 0o755))
		}, is: storage.ErrRootChanged, msg: changed},
		{name: "replaced by a file", swap: func(t *testing.T, path, _ string) {
			must(t, os.RemoveAll(path))
			must(t, os.WriteFile(path, nil, 0o644))
		}, is: storage.ErrRootMissing, msg: func(root string) string {
			return "destination root " + root + " is not a folder (moved or replaced?): recreate the folder or fix the destination's path"
		}},
		{name: "symlink untouched", link: true, swap: func(*testing.T, string, string) {}},
		{name: "symlink re-pointed", link: true, swap: func(t *testing.T, path, target string) {
			other := filepath.Join(filepath.Dir(target), "other")
			must(t, os.Mkdir(other, 0o755))
			must(t, os.Remove(path))
			symlink(t, other, path)
		}, is: storage.ErrRootChanged, msg: changed},
		{name: "symlink dangling", link: true, swap: func(t *testing.T, _, target string) {
			must(t, os.RemoveAll(target))
		}, is: storage.ErrRootMissing, msg: missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "root")
			must(t, os.Mkdir(target, 0o755))
			path := target
			if tc.link {
				path = filepath.Join(dir, "link")
				symlink(t, target, path)
			}
			b := ti.at(t, path)
			tc.swap(t, path, target)
			err := b.CheckRoot(context.Background())
			if tc.is == nil {
				if err != nil {
					t.Fatalf("CheckRoot = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.is) || err.Error() != tc.msg(path) {
				t.Fatalf("CheckRoot = %v, want %q (wrapping %v)", err, tc.msg(path), tc.is)
			}
			// The checker is the storage helper's: backends are checked
			// through CheckRoot.
			if err2 := b.CheckRoot(context.Background()); !errors.Is(err2, tc.is) {
				t.Fatalf("CheckRoot = %v, want %v", err2, tc.is)
			}
		})
	}
}

// TestCheckRootAfterReopen: a backend opened on the new folder passes,
// which is what the stores package does on ErrRootChanged.
func TestCheckRootAfterReopen(t *testing.T) {
	t.Parallel()
	eachImpl(t, checkRootAfterReopen)
}

func checkRootAfterReopen(t *testing.T, ti testImpl) {
	root := filepath.Join(t.TempDir(), "root")
	must(t, os.Mkdir(root, 0o755))
	old := ti.at(t, root)
	must(t, os.Rename(root, root+".old"))
	must(t, os.Mkdir(root, 0o755))
	fresh := ti.at(t, root)
	if err := fresh.CheckRoot(context.Background()); err != nil {
		t.Fatalf("fresh backend: %v", err)
	}
	if err := old.CheckRoot(context.Background()); !errors.Is(err, storage.ErrRootChanged) {
		t.Fatalf("old backend: %v, want ErrRootChanged", err)
	}
}
