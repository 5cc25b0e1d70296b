package probe

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	noRename = "a replacement is not atomic for readers: they could see a missing or half-written output"
	noLink   = "a create-if-absent cannot refuse an existing name: two holders could both create the catalog or lock"
	noFsync  = "a crash could lose outputs or a catalog write that distributor reported done"
)

// Folder checks the file system calls the local backend makes, in a
// scratch folder under root/.distributor/ that it removes: rename(2)
// replaces an existing name with the new file, link(2) names a file and
// refuses a name that exists, and fsync(2) of a file and a folder works.
func Folder(root string) []Check {
	dir := filepath.Join(root, filepath.FromSlash(scratchDir()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return []Check{fail("rename", true, noRename, "make scratch folder %s: %v", dir, err)}
	}
	defer os.RemoveAll(dir)
	return []Check{checkRename(dir), checkLink(dir), checkFsync(dir)}
}

func checkRename(dir string) Check {
	target, tmp := filepath.Join(dir, "target"), filepath.Join(dir, "tmp")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		return fail("rename", true, noRename, "write %s: %v", target, err)
	}
	if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
		return fail("rename", true, noRename, "write %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fail("rename", true, noRename, "rename over an existing file: %v", err)
	}
	got, err := os.ReadFile(target)
	if err != nil || !bytes.Equal(got, []byte("new")) {
		return fail("rename", true, noRename, "after a rename over it, %s holds %q (%v), want the new file", target, got, err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		return fail("rename", true, noRename, "after the rename the old name %s is still there (%v)", tmp, err)
	}
	return pass("rename", "rename replaces an existing file in one step")
}

func checkLink(dir string) Check {
	src, name := filepath.Join(dir, "src"), filepath.Join(dir, "linked")
	if err := os.WriteFile(src, []byte("a"), 0o644); err != nil {
		return fail("link", true, noLink, "write %s: %v", src, err)
	}
	if err := os.Link(src, name); err != nil {
		return fail("link", true, noLink, "link a new name: %v", err)
	}
	if err := os.Link(src, name); !errors.Is(err, fs.ErrExist) {
		return fail("link", true, noLink, "link over an existing name: %v, want it refused (EEXIST)", err)
	}
	return pass("link", "link names a file and refuses an existing name")
}

func checkFsync(dir string) Check {
	name := filepath.Join(dir, "synced")
	f, err := os.Create(name)
	if err != nil {
		return fail("fsync", true, noFsync, "create %s: %v", name, err)
	}
	_, err = f.WriteString("synced")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail("fsync", true, noFsync, "fsync a file: %v", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fail("fsync", true, noFsync, "open folder %s: %v", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !folderSyncUnsupported(err) {
		return fail("fsync", true, noFsync, "fsync a folder: %v", err)
	}
	return pass("fsync", "fsync of a file and its folder works")
}
