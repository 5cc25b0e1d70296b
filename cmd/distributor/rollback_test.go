package main

import (
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
)

// An additive roll back restores the version's paths and keeps the paths
// only later versions wrote; --delete-later deletes those too, and its
// --dry-run lists them as deletes and changes nothing. The producer's next
// version then publishes as usual.
func TestRollbackAdditiveKeepsLaterPathsUnlessDeleteLater(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	v1 := e.bundle("v1", "weatherreporter.today", map[string]string{"report.txt": "one\n", "day-1.txt": "one\n"})
	v2 := e.bundle("v2", "weatherreporter.today", map[string]string{"report.txt": "two\n", "day-2.txt": "two\n"})
	v3 := e.bundle("v3", "weatherreporter.today", map[string]string{"report.txt": "three\n", "day-3.txt": "three\n"})
	for _, b := range []testBundle{v1, v2, v3} {
		e.apply(pipeDaily, b)
	}
	rollback := func(extra ...string) string {
		t.Helper()
		out, errOut, code := e.run(append([]string{"rollback", "--destination", "latest", "--to", v1.Digest, "--bundle", v1.Dir}, extra...)...)
		if code != exitOK {
			t.Fatalf("rollback %v: exit %d\n%s%s", extra, code, out, errOut)
		}
		return out
	}

	// By default: v1's paths again, the later days stay.
	out := rollback()
	if strings.Contains(out, "- day-") || !strings.Contains(out, "~ report.txt") {
		t.Errorf("rollback printed:\n%s\nwant report.txt updated and nothing deleted", out)
	}
	e.wantFiles(root, map[string]string{"report.txt": "one\n", "day-1.txt": "one\n", "day-2.txt": "two\n", "day-3.txt": "three\n", catalog.FileName: ""})
	for _, o := range e.catalogOf(root).Outputs {
		if want := map[string]string{"report.txt": v1.Digest, "day-1.txt": v1.Digest, "day-2.txt": v2.Digest, "day-3.txt": v3.Digest}[o.Path]; o.Source.Digest != want {
			t.Errorf("%s recorded from %s, want %s", o.Path, o.Source.Digest, want)
		}
	}

	// --delete-later --dry-run: the later days listed as deletes, nothing
	// changes.
	before := e.snapshot(root)
	out = rollback("--delete-later", "--dry-run")
	if !strings.Contains(out, "  - day-2.txt\n  - day-3.txt\n  would create 0, update 0, delete 2;") {
		t.Errorf("rollback --delete-later --dry-run printed:\n%s\nwant day-2.txt and day-3.txt as deletes", out)
	}
	e.sameSnapshot("rollback --delete-later --dry-run", before, e.snapshot(root))

	// --delete-later: they go.
	rollback("--delete-later")
	e.wantFiles(root, map[string]string{"report.txt": "one\n", "day-1.txt": "one\n", catalog.FileName: ""})

	// The producer's next version publishes as usual.
	v4 := e.bundle("v4", "weatherreporter.today", map[string]string{"report.txt": "four\n", "day-4.txt": "four\n"})
	if out := e.apply(pipeDaily, v4); strings.Contains(out, "kept") {
		t.Errorf("the next version after the roll back kept paths:\n%s", out)
	}
	e.wantFiles(root, map[string]string{"report.txt": "four\n", "day-1.txt": "one\n", "day-4.txt": "four\n", catalog.FileName: ""})
}
