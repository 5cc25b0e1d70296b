package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
)

// A stage that swapped some replacements in and then fails (another
// writer replaced the next path since it was staged) and is closed
// without committing the rest: the swapped-out files have no name left,
// the conflicting path keeps the other writer's bytes, the paths not
// committed keep their old bytes, and no temp name is left.
func TestAFailedSwappingStageLeavesNoDisplacedFile(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := t.Context()
	const n = displaceAsyncMin + 2
	paths := make([]string, n)
	fps := map[string]string{}
	names := map[string]func() uint64{}
	for i := range paths {
		p := fmt.Sprintf("d/f%d", i)
		paths[i] = p
		if _, err := b.Put(ctx, p, strings.NewReader("old"), 3, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		oi, err := b.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		fps[p], names[p] = oi.Fingerprint, openNlink(t, filepath.Join(b.root, p))
	}
	st := b.Stage(t.Context())
	for _, p := range paths {
		if _, err := st.Put(ctx, p, readerSource(strings.NewReader("new!")), 4, storage.PutOptions{IfMatch: fps[p], DeferSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	const committed = 5
	for _, p := range paths[:committed] {
		must(t, commitErr(st.Commit(ctx, p)))
	}
	// Another writer replaces the next path (a new inode).
	theirs := filepath.Join(b.root, "d", "theirs")
	must(t, os.WriteFile(theirs, []byte("theirs"), 0o644))
	must(t, os.Rename(theirs, filepath.Join(b.root, paths[committed])))
	if _, err := st.Commit(ctx, paths[committed]); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("commit over another writer's file: %v, want ErrConflict", err)
	}
	if got := st.(*stage).swap; got != 1 {
		t.Fatalf("swap = %d, want 1 (a stage of %d files swaps)", got, n)
	}
	must(t, st.Close())
	want := append([]string{"d/"}, paths...)
	slices.Sort(want)
	if got := tree(t, b.root); !slices.Equal(got, want) {
		t.Fatalf("tree after Close = %q, want %q", got, want)
	}
	for i, p := range paths {
		wantData := map[bool]string{true: "new!", false: "old"}[i < committed]
		if i == committed {
			wantData = "theirs"
		}
		if data, _ := os.ReadFile(filepath.Join(b.root, p)); string(data) != wantData {
			t.Errorf("%s = %q, want %q", p, data, wantData)
		}
		if wantNames := map[bool]uint64{true: 0, false: 1}[i < committed]; i != committed && names[p]() != wantNames {
			t.Errorf("old %s has %d names after Close, want %d", p, names[p](), wantNames)
		}
	}
}

// A symlink that took the path's place after the stage checked it (a
// replacement without a condition) is swapped out like a file and removed:
// the path holds the new bytes as a regular file and the link's target,
// outside the root, is untouched.
func TestASymlinkSwappedInBeforeTheCommitIsReplacedNotFollowed(t *testing.T) {
	t.Parallel()
	for _, noExchange := range []bool{false, true} {
		b := newBackend(t)
		b.noExchange.Store(noExchange)
		ctx := t.Context()
		outside := filepath.Join(t.TempDir(), "secret")
		must(t, os.WriteFile(outside, []byte("outside"), 0o644))
		if _, err := b.Put(ctx, "d/a.txt", strings.NewReader("old"), 3, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		st := b.Stage(t.Context())
		st.(*stage).displaced.min = 1
		if _, err := st.Put(ctx, "d/a.txt", readerSource(strings.NewReader("new!")), 4, storage.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(b.root, "d/a.txt")
		must(t, os.Remove(target))
		must(t, os.Symlink(outside, target))
		must(t, commitErr(st.Commit(ctx, "d/a.txt")))
		must(t, st.Close())
		if fi, err := os.Lstat(target); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("noExchange %v: d/a.txt is %v (%v), want a regular file", noExchange, fi.Mode(), err)
		}
		if data, _ := os.ReadFile(target); string(data) != "new!" {
			t.Fatalf("noExchange %v: d/a.txt = %q, want the new bytes", noExchange, data)
		}
		if data, _ := os.ReadFile(outside); string(data) != "outside" {
			t.Fatalf("noExchange %v: the link's target outside the root now holds %q", noExchange, data)
		}
		if got, want := tree(t, b.root), []string{"d/", "d/a.txt"}; !slices.Equal(got, want) {
			t.Fatalf("noExchange %v: tree after Close = %q, want %q", noExchange, got, want)
		}
	}
}
