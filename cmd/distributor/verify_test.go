package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// TestVerifyReadOnlyWithPendingRecovery: verify writes nothing (no lock
// object, no recovery), so it checks a read-only root; an interrupted
// run's intent is reported as a pending recovery and left in place. As a
// non-root user the root really is read-only (root ignores permissions:
// then the unchanged snapshot is the proof).
func TestVerifyReadOnlyWithPendingRecovery(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "alpha\n"}))
	// What an interrupted run leaves: its intent (verify only looks at
	// whether there is one).
	e.writeFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), `{"version": 1, "writes": [], "deletes": []}`)
	if os.Geteuid() != 0 {
		for _, d := range []string{filepath.Join(root, ".distributor"), root} {
			if err := os.Chmod(d, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(d, 0o755) })
		}
	}
	before := e.snapshot(root)

	out, errOut, code := e.run("verify", "--destination", "latest")
	want := "latest (" + root + "): 1 checked, 0 missing, 0 damaged\n" +
		"pending recovery: an interrupted publication is not finished yet; the next apply, prune, reconcile-state or serve run on this root finishes it (its outputs show as in flight until then)\n"
	if code != exitOK || out != want {
		t.Fatalf("verify: exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errOut)
	}
	out, errOut, code = e.run("verify", "--destination", "latest", "--json")
	var rep service.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.PendingRecovery || rep.Checked != 1 || !rep.OK() {
		t.Fatalf("verify --json: exit %d, %+v (%v)\n%s%s", code, rep, err, out, errOut)
	}
	e.sameSnapshot("verify", before, e.snapshot(root))
}

// pausingStores hands out destinations that stop a publication at each
// step: the intent written, half of the outputs named, the catalog about
// to be committed. At each, it sends the step on steps and waits for
// resume.
type pausingStores struct {
	service.Stores
	half   int32 // outputs named before the second stop
	steps  chan string
	resume chan struct{}

	mu     sync.Mutex
	named  []string
	starts atomic.Int32
	done   atomic.Int32
	halfOK chan struct{} // closed once the publication goes on past half
}

func (s *pausingStores) pause(step string) {
	s.steps <- step
	<-s.resume
}

func (s *pausingStores) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	b, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return nil, err
	}
	return &pausingRoot{Backend: b, s: s}, nil
}

type pausingRoot struct {
	storage.Backend
	s *pausingStores
}

func (r *pausingRoot) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	v, err := r.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
	if err == nil {
		r.s.pause("intent written")
	}
	return v, err
}

// Stage names half of the outputs, stops, then names the rest.
func (r *pausingRoot) Stage(ctx context.Context) storage.Stage {
	s := r.s
	return testenv.HookedStage{Stage: r.Backend.Stage(ctx), Hook: func(_ context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		if s.starts.Add(1) > s.half {
			<-s.halfOK
		}
		oi, err := commit()
		if err != nil {
			return oi, err
		}
		s.mu.Lock()
		s.named = append(s.named, p)
		s.mu.Unlock()
		if s.done.Add(1) == s.half {
			s.pause("outputs half written")
			close(s.halfOK)
		}
		return oi, nil
	}}
}

func (r *pausingRoot) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return testenv.HookedCatalog{PendingCatalog: r.Backend.PrepareCatalog(ctx, next, writes), Hook: func(_ context.Context, commit func() (storage.Version, error)) (storage.Version, error) {
		r.s.pause("before commit")
		return commit()
	}}
}

// verifyOut is what the test reads of verify --json.
type verifyOut struct {
	Checked         int      `json:"checked"`
	Missing         []string `json:"missing"`
	Damaged         []string `json:"damaged"`
	InFlight        []string `json:"in_flight"`
	PendingRecovery bool     `json:"pending_recovery"`
}

// TestVerifyBesideAPausedPublication: verify beside a publication stopped
// at each of its steps reports nothing damaged or missing. Outputs the
// publication's intent names and that differ from the catalog are in
// flight: exit 1, run again once it finishes. Before, verify exited 4 and
// listed them as damaged (the operator was told to delete them).
func TestVerifyBesideAPausedPublication(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "replacement"})
	e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{
		"a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n", "d.txt": "d1\n", "old.txt": "old\n"}))
	b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "c.txt": "c2\n", "d.txt": "d2\n"})

	ps := &pausingStores{half: 2, steps: make(chan string), resume: make(chan struct{}), halfOK: make(chan struct{})}
	var out, errb testenv.SyncBuffer
	a := newApp(&out, &errb)
	a.wrapStores = func(s service.Stores) service.Stores { ps.Stores = s; return ps }
	applied := make(chan int, 1)
	go func() {
		applied <- a.run(context.Background(), []string{"--config", e.cfg, "apply", "--pipeline", pipeDaily, "--bundle", b2.Dir})
	}()

	const again = "run verify again once it finishes"
	for _, step := range []struct {
		name     string
		code     int
		inFlight func() []string
	}{
		// Nothing named yet: every output is still the catalog's.
		{"intent written", exitOK, func() []string { return nil }},
		{"outputs half written", exitFailed, func() []string {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			return slices.Sorted(slices.Values(ps.named))
		}},
		// Every output named and old.txt deleted; the catalog not yet.
		{"before commit", exitFailed, func() []string { return []string{"a.txt", "b.txt", "c.txt", "d.txt", "old.txt"} }},
	} {
		select {
		case got := <-ps.steps:
			if got != step.name {
				t.Fatalf("publication stopped at %q, want %q", got, step.name)
			}
		case code := <-applied:
			t.Fatalf("apply exited %d before %q\n%s%s", code, step.name, out.String(), errb.String())
		case <-time.After(time.Minute):
			t.Fatalf("publication did not reach %q", step.name)
		}
		stdout, stderr, code := e.run("verify", "--destination", "latest", "--json")
		var rep verifyOut
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: verify --json: exit %d, %v\n%s%s", step.name, code, err, stdout, stderr)
		}
		want := step.inFlight()
		if code != step.code || rep.Checked != 5 || !rep.PendingRecovery || len(rep.Missing)+len(rep.Damaged) != 0 || !slices.Equal(rep.InFlight, want) && len(want)+len(rep.InFlight) > 0 {
			t.Fatalf("%s: verify: exit %d, %+v\nwant exit %d, in flight %q, nothing missing or damaged\n%s", step.name, code, rep, step.code, want, stderr)
		}
		if code == exitFailed && !strings.Contains(stderr, again) {
			t.Fatalf("%s: verify stderr %q, want it to say %q", step.name, stderr, again)
		}
		ps.resume <- struct{}{}
	}
	if code := <-applied; code != exitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out.String(), errb.String())
	}
	stdout, stderr, code := e.run("verify", "--destination", "latest")
	if want := "latest (" + root + "): 4 checked, 0 missing, 0 damaged\n"; code != exitOK || stdout != want {
		t.Fatalf("verify after the publication: exit %d\n%s%s\nwant %q", code, stdout, stderr, want)
	}
}

// TestSymlinkedFolderRefusedAndRepaired: a managed folder replaced by a
// symlink to outside the root. A publication that would delete a file in
// it refuses before writing anything, naming the link and the fix; verify
// reports the outputs below the link as damaged (exit 4) and names the
// link; reconcile-state drops their records, after which publications
// run again. Nothing outside the root is touched. Before, the publication
// wrote keep.txt, failed on the delete and left its intent, and every
// later apply, reconcile-state and verify failed until the link was gone.
func TestSymlinkedFolderRefusedAndRepaired(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "replacement"})
	e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{
		"keep.txt": "k1\n", "dir/a.txt": "a\n", "dir/gone.txt": "gone\n"}))
	outside := filepath.Join(e.dir, "outside")
	e.writeFile(filepath.Join(outside, "a.txt"), "a\n")
	e.writeFile(filepath.Join(outside, "gone.txt"), "gone\n")
	if err := os.RemoveAll(filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dir")); err != nil {
		t.Skipf("cannot make a symlink here: %v", err)
	}
	before := e.snapshot(outside)

	b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"keep.txt": "k2\n"})
	fix := "remove the symlink(s) [\"dir\"] in " + root
	stdout, stderr, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", b2.Dir)
	if code == exitOK || !strings.Contains(stdout, "- dir/gone.txt") || !strings.Contains(stderr, `planned path(s) ["dir/a.txt" "dir/gone.txt"]: path leads through a symlink; `+fix) {
		t.Fatalf("plan through a symlinked folder: exit %d\n%s%s\nwant the deletes listed and a refusal saying %q", code, stdout, stderr, fix)
	}
	_, stderr, code = e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir)
	if code == exitOK || !strings.Contains(stderr, fix) {
		t.Fatalf("apply through a symlinked folder: exit %d\n%s\nwant a refusal saying %q", code, stderr, fix)
	}
	if got := e.files(root)["keep.txt"]; got != "k1\n" {
		t.Fatalf("keep.txt = %q after the refused apply, want it untouched", got)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(engine.IntentPath))); err == nil {
		if data, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath))); len(data) > 0 {
			t.Fatalf("the refused apply left an intent: %s", data)
		}
	}

	stdout, stderr, code = e.run("verify", "--destination", "latest")
	want := "damaged  dir/a.txt\ndamaged  dir/gone.txt\n" +
		"latest (" + root + "): 3 checked, 0 missing, 2 damaged\n"
	if code != exitDamaged || stdout != want || !strings.Contains(stderr, fix) {
		t.Fatalf("verify: exit %d\nstdout %q\nwant   %q\nstderr %s", code, stdout, want, stderr)
	}

	stdout, stderr, code = e.run("reconcile-state", "--pipeline", pipeDaily, "--destination", "latest")
	if code != exitOK || !strings.Contains(stdout, "dir/a.txt (missing)") || !strings.Contains(stdout, "dir/gone.txt (missing)") {
		t.Fatalf("reconcile-state: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := e.run("verify", "--destination", "latest"); code != exitOK {
		t.Fatalf("verify after reconcile-state: exit %d\n%s", code, stderr)
	}
	e.apply(pipeDaily, b2)
	if got := e.files(root)["keep.txt"]; got != "k2\n" {
		t.Fatalf("keep.txt = %q after the repair, want k2", got)
	}
	e.sameSnapshot("outside the root", before, e.snapshot(outside))
}

// Dispatch of the contract's calls to the hooks above.

func (r *pausingRoot) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return r.hookWriteIntent(ctx, data)
	}
	return r.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}
