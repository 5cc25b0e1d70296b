package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/testenv"
)

// year2099 is a created time from a producer whose clock ran far ahead.
var year2099 = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)

// Rule: a bundle created more than max_clock_skew in the future is refused
// with one line naming the time and the limit, exit 2, writing nothing:
// `bundle create` writes no manifest, `apply`, `plan`, `publish` and
// `bundle verify` leave the root as it was. max_clock_skew widens the
// limit.
func TestRuleBundleFromTheFutureIsRefused(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})

	// bundle create --created 2099-…: no manifest.
	dir := filepath.Join(e.dir, "bundles", "future")
	e.writeFile(filepath.Join(dir, "a.txt"), "one\n")
	_, errOut, code := e.run("bundle", "create", dir, "--id", "weatherreporter.today", "--created", "2099-01-01T00:00:00Z")
	if code != exitUsage || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "created 2099-01-01T00:00:00Z is later than this host's clock") ||
		!strings.Contains(errOut, "plus max_clock_skew (5m0s)") {
		t.Errorf("bundle create --created 2099: exit %d, stderr %q; want exit 2 and one line naming the time and the limit", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); !os.IsNotExist(err) {
		t.Errorf("bundle create wrote a manifest from the future: %v", err)
	}

	// A manifest from the future made by other means: apply and plan refuse it.
	e.apply(pipeDaily, e.bundle("v1", "weatherreporter.today", map[string]string{"a.txt": "one\n"}))
	testenv.WriteBundle(t, dir, "weatherreporter.today", year2099, map[string]string{"a.txt": "2099\n"})
	before := e.snapshot(root)
	for _, cmd := range [][]string{
		{"apply", "--pipeline", pipeDaily, "--bundle", dir},
		{"plan", "--pipeline", pipeDaily, "--bundle", dir},
		{"publish", "--pipeline", pipeDaily, "--bundle", dir}, // refused before NATS is looked for
		{"bundle", "verify", dir},
	} {
		out, errOut, code := e.run(cmd...)
		wantPrefix := "distributor: bundle " + dir + ": bundle created in the future: created 2099-01-01T00:00:00Z is later than this host's clock ("
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, wantPrefix) ||
			!strings.HasSuffix(errOut, ") plus max_clock_skew (5m0s); fix the producer's clock and create the bundle again\n") {
			t.Errorf("%v of a bundle from the future: exit %d, stdout %q, stderr %q; want exit 2 and the one line", cmd, code, out, errOut)
		}
		e.sameSnapshot(cmd[0]+" of a bundle from the future", before, e.snapshot(root))
	}

	// A wider limit accepts a clock an hour ahead, not two.
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(e.cfg, string(cfg)+"max_clock_skew: 90m\n")
	ahead := filepath.Join(e.dir, "bundles", "ahead")
	e.writeFile(filepath.Join(ahead, "a.txt"), "ahead\n")
	if _, errOut, code := e.run("bundle", "create", ahead, "--id", "weatherreporter.today", "--created", time.Now().Add(time.Hour).Format(time.RFC3339)); code != exitOK {
		t.Fatalf("bundle create an hour ahead with max_clock_skew 90m: exit %d, %s", code, errOut)
	}
	if out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", ahead); code != exitOK {
		t.Fatalf("apply of a bundle an hour ahead with max_clock_skew 90m: exit %d\n%s%s", code, out, errOut)
	}
	e.wantFiles(root, map[string]string{"a.txt": "ahead\n", catalog.FileName: ""})
	_, errOut, code = e.run("bundle", "create", ahead, "--id", "weatherreporter.today", "--created", time.Now().Add(2*time.Hour).Format(time.RFC3339))
	if code != exitUsage || !strings.Contains(errOut, "plus max_clock_skew (1h30m0s)") {
		t.Errorf("bundle create two hours ahead with max_clock_skew 90m: exit %d, stderr %q", code, errOut)
	}
}

// The documented way out of an additive root pinned by a record from the
// future (written before distributor refused such bundles): roll back to
// the newest correctly stamped bundle. A roll back replaces the pinned
// paths it writes; with --delete-later (its --dry-run lists them) it also
// deletes the paths only the future version wrote, and the next version
// then writes every path.
func TestPinnedByTheFutureWayOut(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The pin, as a distributor without the clock check published it.
	e.writeFile(e.cfg, string(cfg)+"max_clock_skew: 1000000h\n")
	future := filepath.Join(e.dir, "bundles", "future")
	testenv.WriteBundle(t, future, "weatherreporter.today", year2099, map[string]string{"common.txt": "2099\n", "day-9.txt": "nine\n"})
	if out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", future); code != exitOK {
		t.Fatalf("apply of the pin: exit %d\n%s%s", code, out, errOut)
	}
	e.writeFile(e.cfg, string(cfg))

	today := e.bundle("today", "weatherreporter.today", map[string]string{"common.txt": "today\n", "day-1.txt": "one\n"})
	if out := e.apply(pipeDaily, today); !strings.Contains(out, "1 kept (a newer version of the owner wrote them)") {
		t.Errorf("apply on the pinned root:\n%s\nwant common.txt kept for the version from the future", out)
	}
	rollback := func(extra ...string) string {
		t.Helper()
		out, errOut, code := e.run(append([]string{"rollback", "--destination", "latest", "--to", today.Digest, "--bundle", today.Dir}, extra...)...)
		if code != exitOK {
			t.Fatalf("rollback %v: exit %d\n%s%s", extra, code, out, errOut)
		}
		_, plan, _ := strings.Cut(out, "\n") // after the "rolling back" line
		return plan
	}
	head := "latest (" + root + ", additive)\n"
	if out, want := rollback(), head+"  ~ common.txt\n  0 create, 1 update, 1 unchanged, 0 delete, 0 collision\n"; out != want {
		t.Errorf("rollback:\n%s\nwant:\n%s", out, want)
	}
	e.wantFiles(root, map[string]string{"common.txt": "today\n", "day-1.txt": "one\n", "day-9.txt": "nine\n", catalog.FileName: ""})
	before := e.snapshot(root)
	if out, want := rollback("--delete-later", "--dry-run"), head+"  - day-9.txt\n  would create 0, update 0, delete 1; 2 unchanged, 0 collision\n"+
		"dry run: nothing announced or written (the roll back would go directly)\n"; out != want {
		t.Errorf("rollback --delete-later --dry-run:\n%s\nwant:\n%s", out, want)
	}
	e.sameSnapshot("rollback --delete-later --dry-run", before, e.snapshot(root))
	if out, want := rollback("--delete-later"), head+"  - day-9.txt\n  0 create, 0 update, 2 unchanged, 1 delete, 0 collision\n"; out != want {
		t.Errorf("rollback --delete-later:\n%s\nwant:\n%s", out, want)
	}
	e.wantFiles(root, map[string]string{"common.txt": "today\n", "day-1.txt": "one\n", catalog.FileName: ""})
	for _, o := range e.catalogOf(root).Outputs {
		if o.Source.Created.Equal(year2099) {
			t.Errorf("%s is still recorded from 2099", o.Path)
		}
	}
	tomorrow := e.bundle("tomorrow", "weatherreporter.today", map[string]string{"common.txt": "tomorrow\n", "day-2.txt": "two\n"})
	if out := e.apply(pipeDaily, tomorrow); strings.Contains(out, "kept") {
		t.Errorf("apply of the next version kept paths:\n%s", out)
	}
	e.wantFiles(root, map[string]string{"common.txt": "tomorrow\n", "day-1.txt": "one\n", "day-2.txt": "two\n", catalog.FileName: ""})
}
