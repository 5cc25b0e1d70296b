package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// plantLink replaces p (a folder or file) of the local root at dir with
// a symlink to a new folder outside the root holding files, or, for a
// file p, to the file of that name there. It returns that folder.
func plantLink(t *testing.T, dir, p string, files map[string]string) string {
	t.Helper()
	outside := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := filepath.Join(dir, filepath.FromSlash(p))
	target := outside
	if fi, err := os.Lstat(at); err == nil && !fi.IsDir() {
		target = filepath.Join(outside, filepath.Base(at))
	}
	if err := os.RemoveAll(at); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		t.Skipf("cannot make a symlink here: %v", err)
	}
	return outside
}

// filesUnder reads every file under dir, outside .distributor; a link is
// "symlink", never followed.
func filesUnder(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case err != nil:
			return err
		case d.IsDir() && rel == ".distributor":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&os.ModeSymlink != 0:
			out[rel] = "symlink"
			return nil
		}
		data, err := os.ReadFile(p)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSymlinkRefusedWhenPlanned: a publication that would write or delete
// at or below a symlink planted in the root is refused when planned,
// before its intent and any write, with an error naming the paths, the
// link and the fix; nothing outside the root is touched. Before, a delete
// below the link failed after the other writes had landed, leaving an
// intent that blocked every later run.
func TestSymlinkRefusedWhenPlanned(t *testing.T) {
	t.Parallel()
	v1 := map[string]string{"keep.txt": "k1\n", "dir/a.txt": "a\n", "dir/gone.txt": "gone\n", "f.txt": "f\n"}
	for _, tc := range []struct {
		name    string
		link    string // what becomes a link
		outside map[string]string
		v2      map[string]string
		// bulk adds that many outputs under bulk/ to the first version:
		// enough records that Find looks the few written paths up instead
		// of listing the root.
		bulk      int
		through   []string
		collision bool
		// damaged are what verify reports (default: through).
		damaged []string
	}{
		{name: "delete below a link", link: "dir", outside: map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"},
			v2: map[string]string{"keep.txt": "k2\n", "f.txt": "f\n"}, through: []string{"dir/a.txt", "dir/gone.txt"}},
		// The write is a collision, the delete leads through the link.
		{name: "write and delete below a link", link: "dir", outside: map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"},
			v2: map[string]string{"keep.txt": "k2\n", "dir/a.txt": "a\n", "f.txt": "f\n"}, through: []string{"dir/gone.txt"}, damaged: []string{"dir/a.txt", "dir/gone.txt"}},
		// The link is content the root does not manage, in the way of
		// the folder the writes need: a collision.
		{name: "write below a link", link: "dir", outside: map[string]string{"a.txt": "a\n"},
			v2: map[string]string{"keep.txt": "k2\n", "dir/a.txt": "a2\n", "dir/gone.txt": "gone\n", "f.txt": "f\n"}, through: []string{"dir/a.txt", "dir/gone.txt"}, collision: true},
		{name: "write at a link", link: "f.txt", outside: map[string]string{"f.txt": "f\n"},
			v2: map[string]string{"keep.txt": "k2\n", "dir/a.txt": "a\n", "dir/gone.txt": "gone\n", "f.txt": "f2\n"}, through: []string{"f.txt"}},
		{name: "delete below a link, paths looked up", link: "dir", outside: map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"},
			v2: map[string]string{"keep.txt": "k2\n"}, bulk: 1000, through: []string{"dir/a.txt", "dir/gone.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			root, d := newLocalRoot(t)
			files := map[string]string{}
			for p, c := range v1 {
				files[p] = c
			}
			for i := range tc.bulk {
				files[fmt.Sprintf("bulk/%04d.txt", i)] = "b\n"
			}
			if _, err := publish(t, root, planner.Replacement, files, fixedNow); err != nil {
				t.Fatal(err)
			}
			outside := plantLink(t, d.Path, tc.link, tc.outside)
			before := filesUnder(t, d.Path)
			cv := catalogVersion(t, root)

			_, err := publish(t, root, planner.Replacement, tc.v2, fixedNow.Add(time.Minute))
			want := fmt.Sprintf("%s: planned path(s) %q: path leads through a symlink; remove the symlink(s) [%q] in %s (distributor never follows one: it may lead outside the root), then run reconcile-state",
				root, tc.through, tc.link, root)
			if tc.collision {
				want = fmt.Sprintf("collision with unmanaged content in %s: %d planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): %q, in the way: [%q]",
					root, len(tc.through), tc.through, tc.link)
			}
			if !errors.Is(err, storage.ErrSymlink) && !tc.collision || !errors.Is(err, engine.ErrCollision) && tc.collision {
				t.Fatalf("publication through a link: %v, want storage.ErrSymlink or, for content in the way, a collision", err)
			}
			if err.Error() != want {
				t.Fatalf("error\n got %s\nwant %s", err, want)
			}
			if intentPending(t, d.Path) {
				t.Fatal("the refused publication wrote its intent")
			}
			if got := filesUnder(t, d.Path); !equalMaps(got, before) {
				t.Fatalf("the refused publication changed the root:\n%s", diff(got, before))
			}
			if got := catalogVersion(t, root); got != cv {
				t.Fatal("the refused publication changed the catalog")
			}
			if got := filesUnder(t, outside); !equalMaps(got, tc.outside) {
				t.Fatalf("outside the root: %v, want %v", got, tc.outside)
			}

			// verify: the outputs through the link are damaged, and it
			// names the link.
			e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
			rep, err := e.Verify(ctx, root, all)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damaged == nil {
				tc.damaged = tc.through
			}
			wantStrings(t, "damaged", rep.Damaged, tc.damaged)
			wantStrings(t, "symlinks", rep.Symlinks, []string{tc.link})
			wantStrings(t, "missing", rep.Missing, nil)
		})
	}
}

// TestSymlinkPlantedMidPublicationDoesNotBlockTheRoot: a link planted
// after a publication was planned (or by an earlier version, which did
// not look) makes its delete fail after its writes landed, and leaves its
// intent. Recovery then counts the outputs below the link as gone, so
// reconcile-state and the next publication run, and verify reports those
// outputs as damaged (exit 4) until then. Before, every later run failed
// with "path leads through a symlink" until someone removed the link.
func TestSymlinkPlantedMidPublicationDoesNotBlockTheRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, d := newLocalRoot(t)
	if _, err := publish(t, root, planner.Replacement, map[string]string{"keep.txt": "k1\n", "dir/a.txt": "a\n", "dir/gone.txt": "gone\n"}, fixedNow); err != nil {
		t.Fatal(err)
	}
	var outside string
	planting := &intentHook{Backend: root, after: func() {
		outside = plantLink(t, d.Path, "dir", map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"})
	}}
	_, err := publish(t, planting, planner.Replacement, map[string]string{"keep.txt": "k2\n"}, fixedNow.Add(time.Minute))
	if !errors.Is(err, storage.ErrSymlink) {
		t.Fatalf("publication with a link planted under it: %v", err)
	}
	if !intentPending(t, d.Path) || mustRead(t, root, "keep.txt") != "k2\n" {
		t.Fatal("want the interrupted publication's intent and its write of keep.txt")
	}

	e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
	rep, err := e.Verify(ctx, root, all)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	wantStrings(t, "damaged", rep.Damaged, []string{"dir/a.txt", "dir/gone.txt"})
	wantStrings(t, "symlinks", rep.Symlinks, []string{"dir"})
	// Its write of keep.txt landed; the catalog does not record it yet.
	wantStrings(t, "in flight", rep.InFlight, []string{"keep.txt"})

	// Its recovery drops their records: the intent named them as deletes.
	if _, err := e.Reconcile(ctx, root, heldLease{}, planner.Selector{AllOwners: true}, engine.ReconcileOptions{}); err != nil {
		t.Fatalf("reconcile-state: %v", err)
	}
	cat, _ := readCatalog(t, root)
	wantStrings(t, "records", recordPaths(cat), []string{"keep.txt"})
	if mustRead(t, root, "keep.txt") != "k2\n" || cat.Outputs[0].SHA256 != digestOf([]byte("k2\n")) {
		t.Fatal("keep.txt is not recorded as written")
	}
	if intentPending(t, d.Path) {
		t.Fatal("intent left after reconcile-state")
	}
	rep, err = e.Verify(ctx, root, all)
	if err != nil || !rep.OK() || len(rep.InFlight) != 0 || rep.PendingRecovery {
		t.Fatalf("verify after reconcile-state: %+v, %v", rep, err)
	}
	if _, err := publish(t, root, planner.Replacement, map[string]string{"keep.txt": "k3\n"}, fixedNow.Add(2*time.Minute)); err != nil {
		t.Fatalf("publication after reconcile-state: %v", err)
	}
	if got := filesUnder(t, outside); !equalMaps(got, map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"}) {
		t.Fatalf("outside the root: %v", got)
	}
}

// intentHook calls after once the intent is written.
type intentHook struct {
	storage.Backend
	after func()
}

func (h *intentHook) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	v, err := h.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
	if err == nil && h.after != nil {
		h.after()
		h.after = nil
	}
	return v, err
}

// TestReconcileDropsRecordsThroughSymlinks: reconcile-state drops the
// records of outputs at or below a link as missing, whatever the link
// leads to; the link and what it leads to stay.
func TestReconcileDropsRecordsThroughSymlinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, d := newLocalRoot(t)
	if _, err := publish(t, root, planner.Additive, map[string]string{"keep.txt": "k\n", "dir/a.txt": "a\n", "f.txt": "f\n"}, fixedNow); err != nil {
		t.Fatal(err)
	}
	// The same bytes, the same sizes: only the links make them missing.
	plantLink(t, d.Path, "dir", map[string]string{"a.txt": "a\n"})
	plantLink(t, d.Path, "f.txt", map[string]string{"f.txt": "f\n"})
	e := &engine.Engine{Now: func() time.Time { return fixedNow }, Version: "test"}
	res, err := e.Reconcile(ctx, root, heldLease{}, planner.Selector{AllOwners: true}, engine.ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStrings(t, "removed", removedPaths(res.Plan), []string{"dir/a.txt", "f.txt"})
	cat, _ := readCatalog(t, root)
	wantStrings(t, "records", recordPaths(cat), []string{"keep.txt"})
	for _, p := range []string{"dir", "f.txt"} {
		if fi, err := os.Lstat(filepath.Join(d.Path, p)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s after reconcile-state: %v, want the link left", p, err)
		}
	}
}

// Dispatch of the contract's calls to the hooks above.

func (h *intentHook) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return h.hookWriteIntent(ctx, data)
	}
	return h.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}
