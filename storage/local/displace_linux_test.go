package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// openNlink opens p and returns a function that reports how many names
// the file opened then still has.
func openNlink(t *testing.T, p string) func() uint64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func() uint64 {
		var st unix.Stat_t
		must(t, unix.Fstat(int(f.Fd()), &st))
		return uint64(st.Nlink)
	}
}

// A staged replacement swaps the new file in (or renames it over, where
// the file system cannot swap) and the old file is gone once the stage is
// closed: the folder holds the new bytes under the path and nothing else,
// and the old file has no name left.
func TestStagedReplacementLeavesOnlyTheNewFile(t *testing.T) {
	t.Parallel()
	for _, noExchange := range []bool{false, true} {
		b := newBackend(t)
		b.noExchange.Store(noExchange)
		ctx := t.Context()
		if _, err := b.Put(ctx, "d/a.txt", strings.NewReader("old"), 3, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		old, err := b.Stat(ctx, "d/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		names := openNlink(t, filepath.Join(b.root, "d/a.txt"))
		st := b.Stage(t.Context())
		st.(*stage).displaced.min = 1 // swaps even in a stage of one file
		oi, err := st.Put(ctx, "d/a.txt", readerSource(strings.NewReader("new!")), 4, storage.PutOptions{IfMatch: old.Fingerprint, DeferSync: true})
		if err != nil {
			t.Fatal(err)
		}
		must(t, commitErr(st.Commit(ctx, "d/a.txt")))
		if data, err := os.ReadFile(filepath.Join(b.root, "d/a.txt")); err != nil || string(data) != "new!" {
			t.Fatalf("noExchange %v: after commit %q (%v), want the new bytes", noExchange, data, err)
		}
		must(t, st.Close())
		if got, want := tree(t, b.root), []string{"d/", "d/a.txt"}; !slices.Equal(got, want) {
			t.Fatalf("noExchange %v: tree after Close = %q, want %q", noExchange, got, want)
		}
		if n := names(); n != 0 {
			t.Fatalf("noExchange %v: the replaced file still has %d names after Close", noExchange, n)
		}
		now, err := b.Stat(ctx, "d/a.txt")
		if err != nil || now.Fingerprint != oi.Fingerprint {
			t.Fatalf("noExchange %v: fingerprint %q (%v), want the staged file's %q", noExchange, now.Fingerprint, err, oi.Fingerprint)
		}
	}
}

// A folder that took the path's place after the stage checked it is
// never swapped out: the swap is undone and the replacement fails as a
// rename over a folder does (EISDIR), leaving the folder and the staged
// file where they were.
func TestReplaceGivesBackAFolderSwappedIn(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	must(t, os.MkdirAll(filepath.Join(b.root, "d/a.txt"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.root, "d/a.txt/inner"), []byte("theirs"), 0o644))
	tmp := catalog.TempPrefix + "STAGED"
	must(t, os.WriteFile(filepath.Join(b.root, "d", tmp), []byte("mine"), 0o644))
	s := b.newStage()
	s.displace, s.displaced.min = true, 1
	defer s.Close()
	d, err := s.folder("d", "d/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.replace(d, tmp, "a.txt"); !errors.Is(err, unix.EISDIR) {
		t.Fatalf("replace over a folder: %v, want EISDIR", err)
	}
	if got, want := tree(t, b.root), []string{"d/", "d/" + tmp, "d/a.txt/", "d/a.txt/inner"}; !slices.Equal(got, want) {
		t.Fatalf("tree = %q, want %q", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(b.root, "d", tmp)); string(data) != "mine" {
		t.Fatalf("staged file holds %q, want %q", data, "mine")
	}
}

// prepareStream writes what the writer writes, invisible until the
// commit; a Sync after it covers the bytes (the commit flushes only the
// folder), the commit swaps the old version out and Close removes it, and
// the version returned is the one a read reports.
func TestPreparedVersionFromAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newSyncLogged(t)
	v1, err := b.WriteIfVersion(ctx, "cat.json", []byte("v1"), "")
	if err != nil {
		t.Fatal(err)
	}
	names := openNlink(t, filepath.Join(b.root, "cat.json"))
	big := strings.Repeat("x", 9<<20) // past writebackChunk: its writeback starts as it is written
	pv, err := b.prepareStream(ctx, "cat.json", func(w io.Writer) error {
		_, err := io.WriteString(w, big)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pv.Close()
	if data, _, _ := b.ReadVersion(ctx, "cat.json"); string(data) != "v1" {
		t.Fatalf("before the commit the object is %q, want v1", data)
	}
	place(t, pv)
	must(t, b.Sync(ctx))
	l.take()
	v2, err := pv.CommitIfVersion(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.take(); !slices.Equal(got, []string{"folder ."}) {
		t.Fatalf("commit synced %q, want only the folder", got)
	}
	data, rv, err := b.ReadVersion(ctx, "cat.json")
	if err != nil || string(data) != big || rv != v2 {
		t.Fatalf("after the commit: %d bytes, version %q (%v); want %d bytes, version %q", len(data), rv, err, len(big), v2)
	}
	must(t, pv.Close())
	if n := names(); n != 0 {
		t.Fatalf("the old version still has %d names after Close", n)
	}
	if got := tree(t, b.root); !slices.Equal(got, []string{".distributor/", ".distributor/cas.lock", "cat.json"}) {
		t.Fatalf("tree after Close = %q", got)
	}
}

// A writer that fails leaves nothing: its own error comes back, the
// object is the old one and no temp file is left.
func TestPreparedVersionFromAFailingWriterLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	if _, err := b.WriteIfVersion(ctx, "cat.json", []byte("v1"), ""); err != nil {
		t.Fatal(err)
	}
	before := tree(t, b.root)
	errBroken := errors.New("broken encoder")
	_, err := b.prepareStream(ctx, "cat.json", func(w io.Writer) error {
		if _, err := io.WriteString(w, strings.Repeat("y", 2<<20)); err != nil {
			return err
		}
		return errBroken
	})
	if !errors.Is(err, errBroken) {
		t.Fatalf("prepareStream: %v, want the writer's error", err)
	}
	if data, _, _ := b.ReadVersion(ctx, "cat.json"); string(data) != "v1" {
		t.Fatalf("object = %q, want v1", data)
	}
	if got := tree(t, b.root); !slices.Equal(got, before) {
		t.Fatalf("tree = %q, want %q", got, before)
	}
}

// Only a stage of displaceAsyncMin files or more swaps its replacements
// in (a small one renames over the old files, which costs it no more);
// either way only the new files are left once it is closed.
func TestOnlyALargeStageSwaps(t *testing.T) {
	t.Parallel()
	for _, n := range []int{displaceAsyncMin - 1, displaceAsyncMin} {
		b := newBackend(t)
		ctx := t.Context()
		var want []string
		fps := map[string]string{}
		for i := range n {
			p := "d/f" + strconv.Itoa(i)
			if _, err := b.Put(ctx, p, strings.NewReader("old"), 3, storage.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			oi, err := b.Stat(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			fps[p], want = oi.Fingerprint, append(want, p)
		}
		st := b.Stage(t.Context())
		for _, p := range want {
			if _, err := st.Put(ctx, p, readerSource(strings.NewReader("new!")), 4, storage.PutOptions{IfMatch: fps[p], DeferSync: true}); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range want {
			must(t, commitErr(st.Commit(ctx, p)))
		}
		if got, wantSwap := st.(*stage).swap, map[bool]int{false: -1, true: 1}[n >= displaceAsyncMin]; got != wantSwap {
			t.Fatalf("%d files: swap = %d, want %d", n, got, wantSwap)
		}
		must(t, st.Close())
		slices.Sort(want)
		if got := tree(t, b.root); !slices.Equal(got, append([]string{"d/"}, want...)) {
			t.Fatalf("%d files: tree after Close = %q", n, got)
		}
		for _, p := range want {
			if data, _ := os.ReadFile(filepath.Join(b.root, p)); string(data) != "new!" {
				t.Fatalf("%d files: %s = %q", n, p, data)
			}
		}
	}
}
