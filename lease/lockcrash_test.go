package lease_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// A crash of the machine can leave an unsynced lock object torn: empty, or
// cut anywhere. Several contenders then race for the root; exactly one
// takes it over, every other one gets ErrHeld.
func TestStorageLockLeftUnreadableByACrashIsTakenOverByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := localRoot(t)
	full, _ := json.Marshal(map[string]any{"holder": "crashed", "host": "h", "pid": 1, "generation": 7})
	torn := [][]byte{nil, full[:1], full[:len(full)/2], full[:len(full)-1], []byte("\x00\x00\x00\x00")}
	const contenders = 16
	for round := range 40 {
		content := torn[round%len(torn)]
		_, v, err := root.Store.ReadVersion(ctx, lease.LockPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.Store.WriteIfVersion(ctx, lease.LockPath, content, v); err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []string
			leases  []lease.Lease
		)
		for i := range contenders {
			wg.Go(func() {
				name := fmt.Sprintf("c%d", i)
				l := lease.NewStorageLocker(name, time.Minute)
				<-start
				ls, err := l.Acquire(ctx, root)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners, leases = append(winners, name), append(leases, ls)
				case !errors.Is(err, lease.ErrHeld):
					t.Errorf("round %d, %s: %v, want ErrHeld or the lock", round, name, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d (lock %q): %d contenders took the torn lock over (%v), want exactly 1", round, content, len(winners), winners)
		}
		data, _, err := root.Store.ReadVersion(ctx, lease.LockPath)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct{ Holder string }
		if err := json.Unmarshal(data, &rec); err != nil || rec.Holder != winners[0] {
			t.Fatalf("round %d: lock holds %q, want the record of %s", round, data, winners[0])
		}
		// The next round tears the lock again, whatever is there.
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// durableRefused is the local backend with its durable compare-and-swap
// failing the test: the lock object is written with storage.DeferSync.
type durableRefused struct {
	*local.Backend
	t *testing.T
}

func (d durableRefused) hookWriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if !storage.HasOption(opts, storage.DeferSync) {
		d.t.Errorf("lock object written with a flush (WriteIfVersion %s)", p)
	}
	return d.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}

func (d durableRefused) hookDeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if !storage.HasOption(opts, storage.DeferSync) {
		d.t.Errorf("lock object removed with a flush (DeleteIfVersion %s)", p)
	}
	return d.Backend.DeleteIfVersion(ctx, p, want, opts...)
}

func TestStorageLockWritesWithoutFlushWhereTheBackendAllows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := lease.Root{Key: "file://" + b.String() + "/", Store: durableRefused{b, t}}
	dead := func(pid int) bool { return pid != 100 }
	a := lease.NewStorageLocker("a", time.Hour, lease.WithProcess("host", 100, dead))
	if _, err := a.Acquire(ctx, root); err != nil {
		t.Fatal(err)
	}
	c := lease.NewStorageLocker("c", time.Hour, lease.WithProcess("host", 200, dead))
	lc, err := c.Acquire(ctx, root) // takes over the dead holder's lock
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, v, _ := b.ReadVersion(ctx, lease.LockPath); v != "" {
		t.Fatal("lock object still there after Release")
	}
}

// Child-process modes of the cross-process tests, chosen by environment.
const (
	childRootEnv = "LEASE_TEST_CHILD_ROOT"
	childModeEnv = "LEASE_TEST_CHILD_MODE"
	childMarkEnv = "LEASE_TEST_CHILD_MARK"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childRootEnv); dir != "" {
		os.Exit(child(dir, os.Getenv(childModeEnv), os.Getenv(childMarkEnv)))
	}
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8, TempInMemory: true}))
}

// child runs as another process on the same root. "contend": several
// goroutines take and release the lock in turns, each creating the marker
// file while holding it (O_EXCL: a second holder at once fails). "hold":
// take the lock, say so on stdout, and wait to be killed.
func child(dir, mode, mark string) int {
	ctx := context.Background()
	b, err := local.New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	root := lease.Root{Key: "file://" + dir + "/", Store: b}
	if mode == "hold" {
		if _, err := lease.NewStorageLocker("holder", time.Hour).Acquire(ctx, root); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("held")
		select {}
	}
	if mode == "take" {
		return takeOnce(ctx, root)
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	for g := range contendGoroutines {
		wg.Go(func() {
			if err := contend(ctx, root, fmt.Sprintf("p%d.g%d", os.Getpid(), g), mark); err != nil {
				fmt.Fprintln(os.Stderr, err)
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return 1
	}
	return 0
}

const contendGoroutines, contendRounds = 3, 40

// takeOnce has contendGoroutines goroutines try the lock once each, prints
// how many got it, and keeps what it holds until stdin closes (a holder
// that exits would be taken over as dead).
func takeOnce(ctx context.Context, root lease.Root) int {
	var wins atomic.Int32
	var wg sync.WaitGroup
	for g := range contendGoroutines {
		wg.Go(func() {
			_, err := lease.NewStorageLocker(fmt.Sprintf("p%d.g%d", os.Getpid(), g), time.Minute).Acquire(ctx, root)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, lease.ErrHeld):
				fmt.Fprintln(os.Stderr, err)
			}
		})
	}
	wg.Wait()
	fmt.Println(wins.Load())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func contend(ctx context.Context, root lease.Root, name, mark string) error {
	l := lease.NewStorageLocker(name, time.Minute)
	for range contendRounds {
		ls, err := l.Acquire(ctx, root)
		for errors.Is(err, lease.ErrHeld) {
			runtime.Gosched()
			ls, err = l.Acquire(ctx, root)
		}
		if err != nil {
			return err
		}
		f, err := os.OpenFile(mark, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("%s holds the lock, but: %w (two holders at once)", name, err)
		}
		_, _ = f.WriteString(name)
		f.Close()
		if err := os.Remove(mark); err != nil {
			return err
		}
		if err := ls.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

func childCmd(t *testing.T, dir, mode, mark string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRootEnv+"="+dir, childModeEnv+"="+mode, childMarkEnv+"="+mark)
	cmd.Stderr = os.Stderr
	return cmd
}

// Two processes, several goroutines each, take the same root's lock in
// turns: never two holders at once.
func TestStorageLockExcludesAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(t.TempDir(), "held")
	cmds := []*exec.Cmd{childCmd(t, dir, "contend", mark), childCmd(t, dir, "contend", mark)}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v (see its output above)", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, lease.LockPath)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock object after every holder released: %v, want gone", err)
	}
}

// A torn lock raced for by two processes of several goroutines each: one
// of them all takes it over.
func TestStorageLockLeftUnreadableIsTakenOverByOneOfTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		_, v, err := b.ReadVersion(ctx, lease.LockPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteIfVersion(ctx, lease.LockPath, []byte(`{"holder":"crashed","ex`), v); err != nil {
			t.Fatal(err)
		}
		// Both start before either is heard from, so that they race.
		type proc struct {
			cmd *exec.Cmd
			in  io.WriteCloser
			out *bufio.Reader
		}
		var procs []proc
		for range 2 {
			cmd := childCmd(t, dir, "take", "")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill() })
			procs = append(procs, proc{cmd, in, bufio.NewReader(out)})
		}
		total := 0
		for _, p := range procs {
			line, err := p.out.ReadString('\n')
			n, cerr := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || cerr != nil {
				t.Fatalf("round %d: child said %q: %v", round, line, err)
			}
			total += n
		}
		if total != 1 {
			t.Fatalf("round %d: %d of 2 processes × %d goroutines took the torn lock over, want exactly 1", round, total, contendGoroutines)
		}
		for i, p := range procs {
			p.in.Close()
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("round %d, process %d: %v", round, i, err)
			}
		}
		// The winner exited holding the lock: the next round tears it again.
	}
}

// A holder killed while holding the lock leaves it behind; the next run
// on the same host sees its process gone and takes the root over.
func TestStorageLockOfAKilledProcessIsTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cmd := childCmd(t, dir, "hold", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := lease.Root{Key: "file://" + dir + "/", Store: b}
	if _, err := lease.NewStorageLocker("next", time.Hour).Acquire(ctx, root); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("while the holder lives: %v, want ErrHeld", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ls, err := lease.NewStorageLocker("next", time.Hour).Acquire(ctx, root)
	if err != nil {
		t.Fatalf("after the holder (pid %d) was killed: %v", cmd.Process.Pid, err)
	}
	data, _, _ := b.ReadVersion(ctx, lease.LockPath)
	var rec struct {
		Holder string
		PID    int
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.Holder != "next" || rec.PID != os.Getpid() {
		t.Fatalf("lock holds %s, want next's record (pid %s)", data, strconv.Itoa(os.Getpid()))
	}
	_ = ls.Release(ctx)
}

// BenchmarkStorageLockAcquireRelease: one lock taken and given back on a
// local root, without flushes (WriteIfVersionNoSync) and with them.
func BenchmarkStorageLockAcquireRelease(b *testing.B) {
	for _, c := range []struct {
		name    string
		durable bool
	}{{"unsynced", false}, {"durable", true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			lb, err := local.New(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			var st storage.Backend = lb
			if c.durable {
				st = durableLock{lb}
			}
			root := lease.Root{Key: "file://" + lb.String() + "/", Store: st}
			l := lease.NewStorageLocker("bench", time.Minute)
			for b.Loop() {
				ls, err := l.Acquire(ctx, root)
				if err != nil {
					b.Fatal(err)
				}
				if err := ls.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// durableLock flushes the lock object as WriteIfVersion does.
type durableLock struct{ storage.Backend }

func (d durableLock) hookWriteNoSync(ctx context.Context, p string, data []byte, want storage.Version) (storage.Version, error) {
	return d.WriteIfVersion(ctx, p, data, want)
}

func (d durableLock) hookDeleteNoSync(ctx context.Context, p string, want storage.Version) error {
	return d.DeleteIfVersion(ctx, p, want)
}

// Dispatch of the contract's calls to the hooks above.

func (d durableRefused) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {

	return d.hookWriteIfVersion(ctx, p, data, want, opts...)
}

func (d durableRefused) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {

	return d.hookDeleteIfVersion(ctx, p, want, opts...)
}

func (d durableLock) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if storage.HasOption(opts, storage.DeferSync) {
		return d.hookWriteNoSync(ctx, p, data, want)
	}
	return d.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}

func (d durableLock) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if storage.HasOption(opts, storage.DeferSync) {
		return d.hookDeleteNoSync(ctx, p, want)
	}
	return d.Backend.DeleteIfVersion(ctx, p, want, opts...)
}
