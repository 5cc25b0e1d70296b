package engine_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/planner"
)

// What a publication notices of an output changed in place behind its
// back, in a local root, where the fingerprint is inode, size and mtime
// (docs/guarantees.md says the same):
//   - bytes rewritten in place change the mtime: the next publication
//     hashes that output and rewrites it;
//   - the same size rewritten in place with the mtime set back (touch -r,
//     a copy that keeps times) leaves the fingerprint as it was: the
//     publication keeps the output, and only verify, which hashes every
//     output, finds it.
func TestInPlaceChangeBehindTheRootsBack(t *testing.T) {
	t.Parallel()
	for _, restoreMtime := range []bool{false, true} {
		name := "new mtime"
		if restoreMtime {
			name = "mtime set back"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			root, base := newLocalRoot(t)
			h.AddDest(named(base, "site", planner.Replacement), root, pipeA)
			h.MustPublish(t1, pipeA, "site", "weatherreporter.v", eight("v0"))

			file := filepath.Join(base.Path, "c.txt")
			before, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("v9"), 0); err != nil { // same size, same inode
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			mtime := before.ModTime().Add(time.Second) // past any timestamp granularity
			if restoreMtime {
				mtime = before.ModTime()
			}
			if err := os.Chtimes(file, mtime, mtime); err != nil {
				t.Fatal(err)
			}

			res, err := h.Publish(t2, pipeA, "site", mustBundle(t, t1.Add(time.Minute), eight("v0")))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := h.verify("site", all)
			if err != nil {
				t.Fatal(err)
			}
			if !restoreMtime {
				wantStrings(t, "written", itemPaths(res.Written), []string{"c.txt"})
				wantContents(t, root, eight("v0"))
				if !rep.OK() {
					t.Fatalf("verify after the repair: %+v", rep)
				}
				return
			}
			wantStrings(t, "written", itemPaths(res.Written), nil)
			wantStrings(t, "damaged", rep.Damaged, []string{"c.txt"})
		})
	}
}

// mustBundle makes a bundle of files created at created.
func mustBundle(t *testing.T, created time.Time, files map[string]string) string {
	t.Helper()
	dir, _ := makeBundleAt(t, "weatherreporter.v", created, files)
	return dir
}
