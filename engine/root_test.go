package engine_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// swapAfterFirstPut runs swap once, right after the publication's first
// output lands: the remaining writes still go through the handle on the
// folder that was moved away, as they would in a running serve.
type swapAfterFirstPut struct {
	storage.Backend
	swap    func()
	swapped bool
}

func (s *swapAfterFirstPut) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := s.Backend.Put(ctx, p, r, size, o)
	if err != nil {
		return oi, err
	}
	if !catalog.IsReserved(p) && !s.swapped {
		s.swapped = true
		s.swap()
	}
	return oi, nil
}

// Stage swaps right after the first staged output is named.
func (s *swapAfterFirstPut) Stage(ctx context.Context) storage.Stage {
	return hookedStage(s.Backend.Stage(ctx), func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		oi, err := commit()
		if err == nil && !s.swapped {
			s.swapped = true
			s.swap()
		}
		return oi, err
	})
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestRootSwappedMidPublicationCommitsNothingIntoTheMovedFolder: the root is
// moved away (and replaced, or not) between the writes and the catalog
// commit. The publication fails before committing, so the moved folder gets
// no catalog claiming the writes; the retry, on a backend opened afresh
// (what the stores package does), publishes into the new folder.
func TestRootSwappedMidPublicationCommitsNothingIntoTheMovedFolder(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	for _, tc := range []struct {
		name    string
		replace bool
		want    error
	}{
		{name: "moved and replaced", replace: true, want: storage.ErrRootChanged},
		{name: "moved away", replace: false, want: storage.ErrRootMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			must(t, os.Mkdir(root, 0o755))
			lb, err := local.New(root)
			if err != nil {
				t.Fatal(err)
			}
			b := &swapAfterFirstPut{Backend: lb, swap: func() {
				must(t, os.Rename(root, root+".old"))
				if tc.replace {
					must(t, os.Mkdir(root, 0o755))
				}
			}}
			_, err = publish(t, b, planner.Additive, files, fixedNow)
			if !errors.Is(err, tc.want) {
				t.Fatalf("publication across the swap: %v, want %v", err, tc.want)
			}
			if !b.swapped {
				t.Fatal("the swap never ran")
			}
			if exists(t, filepath.Join(root+".old", catalog.FileName)) {
				t.Fatal("a catalog was committed into the folder that was moved away")
			}
			if !tc.replace {
				return
			}
			if got := snapshot(t, root); len(got) != 0 {
				t.Fatalf("the new root got %v from the publication that did not commit", got)
			}
			fresh, err := local.New(root)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := publish(t, fresh, planner.Additive, files, fixedNow); err != nil {
				t.Fatalf("retry in the new root: %v", err)
			}
			got := snapshot(t, root)
			for p, c := range files {
				if got[p] != c {
					t.Fatalf("new root: %s = %q, want %q", p, got[p], c)
				}
			}
			if cat, _ := readCatalog(t, fresh); len(cat.Outputs) != len(files) {
				t.Fatalf("new root's catalog records %d outputs, want %d", len(cat.Outputs), len(files))
			}
			if exists(t, filepath.Join(root+".old", catalog.FileName)) {
				t.Fatal("the retry committed into the moved folder")
			}
		})
	}
}

// TestUnchangedIsNotReportedFromAMovedRoot: a publication with nothing to
// change does not commit, yet it says the configured root holds the
// bundle; through a handle on a folder moved away that would be false.
func TestUnchangedIsNotReportedFromAMovedRoot(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.txt": "a\n"}
	root := filepath.Join(t.TempDir(), "root")
	must(t, os.Mkdir(root, 0o755))
	b, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := publish(t, b, planner.Additive, files, fixedNow); err != nil {
		t.Fatal(err)
	}
	must(t, os.Rename(root, root+".old"))
	must(t, os.Mkdir(root, 0o755))
	res, err := publish(t, b, planner.Additive, files, fixedNow)
	if !errors.Is(err, storage.ErrRootChanged) {
		t.Fatalf("no-op publication through the old handle: %v (unchanged %d), want ErrRootChanged", err, res.Unchanged)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
