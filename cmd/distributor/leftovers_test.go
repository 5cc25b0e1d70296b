package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
)

// A temp file a killed write left behind: verify reports it (text and
// JSON), reconcile-state --dry-run names it, reconcile-state removes it;
// a temp file younger than an hour (maybe a write in flight) stays.
func TestVerifyReportsAndReconcileRemovesLeftovers(t *testing.T) {
	t.Parallel()
	e, _ := newOfflineEnv(t)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.one", "--bundle", b1); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	root := e.roots["d1"]
	killed := "sub/" + catalog.TempPrefix + "KILLED"
	young := catalog.TempPrefix + "YOUNG"
	old := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	for name, mtime := range map[string]time.Time{killed: old, young: time.Now()} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 1234), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}

	code, stdout, stderr := e.cmd(t, "verify", "--destination", "d1", "--json")
	if code != 0 {
		t.Fatalf("verify --json: exit %d (leftovers are not damage)\n%s%s", code, stdout, stderr)
	}
	var rep struct {
		Leftovers struct {
			Count  int        `json:"count"`
			Bytes  int64      `json:"bytes"`
			Oldest *time.Time `json:"oldest"`
			Paths  []string   `json:"paths"`
		} `json:"leftovers"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, stdout)
	}
	lo := rep.Leftovers
	if lo.Count != 1 || lo.Bytes != 1234 || lo.Oldest == nil || !lo.Oldest.Equal(old) || !slices.Equal(lo.Paths, []string{killed}) {
		t.Fatalf("verify --json leftovers = %+v, want 1 of 1234 bytes at %s from %v", lo, killed, old)
	}
	code, stdout, _ = e.cmd(t, "verify", "--destination", "d1")
	if want := "1 leftover(s) of interrupted writes in the root, 1234 bytes, oldest from " + old.Format(time.RFC3339) + ": reconcile-state removes them"; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("verify: exit %d, printed\n%s\nwant a line %q", code, stdout, want)
	}

	code, stdout, stderr = e.cmd(t, "reconcile-state", "--all-owners", "--destination", "d1", "--dry-run")
	if want := "would remove 1 leftover(s) of interrupted writes, 1234 bytes"; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("reconcile-state --dry-run: exit %d\n%s%s\nwant %q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(killed))); err != nil {
		t.Fatalf("the dry run removed the leftover: %v", err)
	}
	code, stdout, stderr = e.cmd(t, "reconcile-state", "--all-owners", "--destination", "d1")
	if want := "removed 1 leftover(s) of interrupted writes, 1234 bytes"; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("reconcile-state: exit %d\n%s%s\nwant %q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(filepath.Join(root, "sub")); !os.IsNotExist(err) {
		t.Errorf("sub/: the leftover (or its emptied folder) is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, young)); err != nil {
		t.Errorf("the young temp file was removed: %v", err)
	}
	code, stdout, _ = e.cmd(t, "verify", "--destination", "d1", "--json")
	if code != 0 || !strings.Contains(stdout, `"leftovers": {`+"\n"+`    "count": 0,`) {
		t.Errorf("verify after reconcile-state: exit %d\n%s", code, stdout)
	}
}
