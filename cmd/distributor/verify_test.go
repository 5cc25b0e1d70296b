package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/distributor/distributor/engine"
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
		"pending recovery: an interrupted publication is not finished yet; the next apply, prune, reconcile-state or serve run on this root finishes it (its outputs may show as damaged until then)\n"
	if code != exitOK || out != want {
		t.Fatalf("verify: exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errOut)
	}
	out, errOut, code = e.run("verify", "--destination", "latest", "--json")
	var rep engine.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.PendingRecovery || rep.Checked != 1 || !rep.OK() {
		t.Fatalf("verify --json: exit %d, %+v (%v)\n%s%s", code, rep, err, out, errOut)
	}
	e.sameSnapshot("verify", before, e.snapshot(root))
}
