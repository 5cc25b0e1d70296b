package local

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// The kill helper: the test binary re-run with these set writes to a root
// and is killed (SIGKILL, as kill -9) half-way through the bytes.
const (
	envKillRoot     = "LOCAL_TEST_KILL_ROOT"
	envKillPath     = "LOCAL_TEST_KILL_PATH"
	envKillSize     = "LOCAL_TEST_KILL_SIZE"
	envKillIfAbsent = "LOCAL_TEST_KILL_IF_ABSENT"
)

func TestMain(m *testing.M) {
	if root := os.Getenv(envKillRoot); root != "" {
		os.Exit(killedWrite(root))
	}
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8}))
}

// killingReader yields n bytes, then kills its own process.
type killingReader struct{ n int64 }

func (r *killingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	p = p[:min(int64(len(p)), r.n)]
	clear(p)
	r.n -= int64(len(p))
	return len(p), nil
}

func killedWrite(root string) int {
	b, err := New(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	size, _ := strconv.ParseInt(os.Getenv(envKillSize), 10, 64)
	opts := storage.PutOptions{IfAbsent: os.Getenv(envKillIfAbsent) == "1"}
	_, err = b.Put(context.Background(), os.Getenv(envKillPath), &killingReader{n: size / 2}, size, opts)
	fmt.Fprintln(os.Stderr, "the write was not killed:", err)
	return 2
}

// killDuringPut runs a Put of size bytes to p in a child process that is
// killed with SIGKILL after writing half of them.
func killDuringPut(t *testing.T, root, p string, size int64, ifAbsent bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envKillRoot+"="+root, envKillPath+"="+p,
		envKillSize+"="+strconv.FormatInt(size, 10), envKillIfAbsent+"="+map[bool]string{true: "1"}[ifAbsent])
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the writer was not killed: %v", err)
	}
}

// interruptByKill is the contract suite's interrupted write: a writer
// process killed halfway through a Put.
func interruptByKill(t *testing.T, b storage.Backend, p string, size int64) {
	killDuringPut(t, b.String(), p, size, false)
}

// Temp files of every kind are found wherever they are, never through a
// symlink, and objects never are.
func TestLeftoversEverywhere(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	root := b.String()
	old := time.Now().Add(-2 * time.Hour)
	write := func(rel string, mtime time.Time) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(catalog.TempPrefix+"CATALOG", old)                // a catalog commit
	write(".distributor/"+catalog.TempPrefix+"INTENT", old) // an intent write
	write(".distributor/tmp/ABC.tmp", old)                  // earlier versions' temp folder
	write("a/b/c/"+catalog.TempPrefix+"OUT", old)           // an output
	write("a/b/"+catalog.TempPrefix+"YOUNG", time.Now())    // maybe in flight
	write("a/object.txt", old)                              // an object
	outside := t.TempDir()                                  // reached only through a link: not the root's
	linked := filepath.Join(outside, catalog.TempPrefix+"LINKED")
	if err := os.WriteFile(linked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(linked, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ls, err := b.Leftovers(t.Context(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Path)
		if l.Size != 5 || !l.ModTime.Equal(old) {
			t.Errorf("leftover %+v: want size 5, time %v", l, old)
		}
	}
	want := []string{catalog.TempPrefix + "CATALOG", ".distributor/" + catalog.TempPrefix + "INTENT", ".distributor/tmp/ABC.tmp",
		"a/b/c/" + catalog.TempPrefix + "OUT"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Leftovers = %q, want %q", got, want)
	}
	if err := b.RemoveLeftovers(t.Context(), ls); err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s: still there after RemoveLeftovers (%v)", p, err)
		}
	}
	// The emptied folder went with its temp file; the young one stayed.
	if _, err := os.Stat(filepath.Join(root, "a/b/c")); !os.IsNotExist(err) {
		t.Errorf("a/b/c: emptied folder kept (%v)", err)
	}
	for _, p := range []string{"a/b/" + catalog.TempPrefix + "YOUNG", "a/object.txt", "link/" + catalog.TempPrefix + "LINKED"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}

// A write of a new path (PutOptions.IfAbsent, what publications use for
// new outputs) killed half-way leaves nothing at all in the tree: the
// bytes went to an unnamed file (O_TMPFILE), named only when complete.
func TestKilledNewPathWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	if b.noTmpfile.Load() {
		t.Skip("this filesystem has no O_TMPFILE")
	}
	killDuringPut(t, b.String(), "dir/new.bin", 4<<20, true)
	var names []string
	err := filepath.WalkDir(b.String(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil || len(names) != 0 {
		t.Fatalf("files left in the root after a killed write of a new path: %q, %v; want none", names, err)
	}
}

// BenchmarkPutNew4KiB: writes of new paths as publications make them
// (IfAbsent, DeferSync), through an unnamed file and through a named temp
// file, to compare the two.
func BenchmarkPutNew4KiB(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4<<10)
	for _, named := range []bool{false, true} {
		b.Run(map[bool]string{false: "unnamed", true: "named"}[named], func(b *testing.B) {
			be := newBackend(b)
			if named {
				be.noTmpfile.Store(true)
			} else if be.noTmpfile.Load() {
				b.Skip("no O_TMPFILE here")
			}
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				p := fmt.Sprintf("d%02d/f%06d", i%20, i)
				if _, err := be.Put(b.Context(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{IfAbsent: true, DeferSync: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
