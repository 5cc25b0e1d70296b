package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// The kill helper: the test binary re-run with these set writes to a root
// (through the portable implementation with envKillPortable) and is killed
// (os.Process.Kill: SIGKILL, as kill -9, on Unix) half-way through the
// bytes.
const (
	envKillRoot     = "LOCAL_TEST_KILL_ROOT"
	envKillPath     = "LOCAL_TEST_KILL_PATH"
	envKillSize     = "LOCAL_TEST_KILL_SIZE"
	envKillIfAbsent = "LOCAL_TEST_KILL_IF_ABSENT"
	envKillPortable = "LOCAL_TEST_KILL_PORTABLE"
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
		if self, err := os.FindProcess(os.Getpid()); err == nil {
			self.Kill()
		}
		select {}
	}
	p = p[:min(int64(len(p)), r.n)]
	clear(p)
	r.n -= int64(len(p))
	return len(p), nil
}

func killedWrite(root string) int {
	var impl []Option
	if os.Getenv(envKillPortable) == "1" {
		impl = append(impl, Portable())
	}
	b, err := New(root, impl...)
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

// killDuringPut runs a Put of size bytes to p in a child process, through
// the implementation b has, that is killed after writing half of them.
func killDuringPut(t *testing.T, b *Backend, p string, size int64, ifAbsent bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envKillRoot+"="+b.root, envKillPath+"="+p,
		envKillSize+"="+strconv.FormatInt(size, 10), envKillIfAbsent+"="+map[bool]string{true: "1"}[ifAbsent],
		envKillPortable+"="+map[bool]string{true: "1"}[b.portable])
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || !killed(ee.ProcessState) {
		t.Fatalf("the writer was not killed: %v", err)
	}
}

// interruptByKill is the contract suite's interrupted write: a writer
// process killed halfway through a Put.
func interruptByKill(t *testing.T, b storage.Backend, p string, size int64) {
	killDuringPut(t, b.(*Backend), p, size, false)
}

// Temp files of every kind are found wherever they are, never through a
// symlink, and objects never are.
func TestLeftoversEverywhere(t *testing.T) {
	t.Parallel()
	eachImpl(t, func(t *testing.T, ti testImpl) { leftoversEverywhere(t, ti.new(t)) })
}

func leftoversEverywhere(t *testing.T, b *Backend) {
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
	symlink(t, outside, filepath.Join(root, "link"))
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
