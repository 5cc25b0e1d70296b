package main

// One test per catalog/workflow rule (docs/catalog.md),
// driven only through the CLI (bundle
// create, plan, apply) on temp folders.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/testenv"
)

const (
	pipeDaily = "weatherreporter.daily"
	pipeTides = "tides.hourly"
)

var bothWorkflows = []string{"replacement", "additive"}

// sharedRoot configures two pipelines publishing to two destinations that
// share one root: daily -> "a", tides -> "b".
func (e *cliEnv) sharedRoot(root, workflow string) {
	e.writeConfig(
		[]pipeSpec{{pipeDaily, []string{"a"}}, {pipeTides, []string{"b"}}},
		[]destSpec{{ID: "a", Root: root, Workflow: workflow}, {ID: "b", Root: root, Workflow: workflow}},
	)
}

// legacyRoot writes a superseded catalog of the given schema version.
func (e *cliEnv) legacyRoot(root string, schema int) {
	e.t.Helper()
	name := map[int]string{2: testenv.LegacyV2SingleOwner, 3: testenv.LegacyV3SharedRoot}[schema]
	data := testenv.CatalogFixture(e.t, name)
	e.writeFile(filepath.Join(root, catalog.FileName), string(data))
}

// Rule: planned outputs are written to their resolved destination paths
// (layout prefix) and recorded with the publication's owner and source.
func TestRulePlannedOutputsWrittenAtResolvedPaths(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf, Prefix: "{source_name}/"})
			b := e.bundle("b", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n", "data/wind.csv": "n,3\n"})

			c := startClock()
			out := e.apply(pipeDaily, b)
			c = c.stop()

			want := fmt.Sprintf("latest (%s, %s)\n  + tomorrow/data/wind.csv\n  + tomorrow/report.md\n  2 create, 0 update, 0 unchanged, 0 delete, 0 collision\n", root, wf)
			if out != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
			}
			e.wantFiles(root, map[string]string{"tomorrow/report.md": "# Tomorrow\n", "tomorrow/data/wind.csv": "n,3\n", catalog.FileName: ""})
			cat := e.catalogOf(root)
			e.wantRecords(cat,
				srcRecord("tomorrow/report.md", pipeDaily, "latest", b, "# Tomorrow\n"),
				srcRecord("tomorrow/data/wind.csv", pipeDaily, "latest", b, "n,3\n"))
			e.wantCreatedIn(c, cat, "tomorrow/report.md", "tomorrow/data/wind.csv")
			if !c.holds(cat.CreatedAt) || !cat.UpdatedAt.Equal(cat.CreatedAt) {
				t.Errorf("catalog created_at %s updated_at %s, want both in the run", cat.CreatedAt, cat.UpdatedAt)
			}
			if _, err := os.Stat(filepath.Join(root, ".distributor", "lock")); !os.IsNotExist(err) {
				t.Errorf("the lock object is left behind: %v", err)
			}
			// A local root keeps its intent file, emptied.
			if data, err := os.ReadFile(filepath.Join(root, ".distributor", "intent.json")); len(data) > 0 || err != nil && !os.IsNotExist(err) {
				t.Errorf("the intent is left behind: %d bytes, %v", len(data), err)
			}
		})
	}
}

// Rule: a planned path that is already managed is overwritten in place:
// bytes rewritten only when they differ, the record takes the new source,
// created_at is kept and updated_at advances (catalog too).
func TestRuleOverwriteManagedOutputUpdatesRecordInPlace(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			t.Parallel()
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			b1 := e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "one\n", "b.txt": "bee\n"})
			first := e.at(bundleCreated.Add(time.Hour))
			e.apply(pipeDaily, b1)
			cat1 := e.catalogOf(root)
			e.wantCreatedIn(first, cat1, "a.txt", "b.txt")
			bStamp := stampOf(t, filepath.Join(root, "b.txt"))

			// Catalog times have whole seconds: the next run is a second later.
			b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "two!\n", "b.txt": "bee\n"})
			c := e.at(first.from.Add(time.Second))
			res := e.applyJSON(pipeDaily, b2)

			wantItems := []itemJSON{
				{Path: "a.txt", Action: "update", Write: true, SHA256: sha("two!\n"), Size: 5},
				{Path: "b.txt", Action: "update", Write: false, SHA256: sha("bee\n"), Size: 4},
			}
			if len(res) != 1 || !res[0].Changed || !reflect.DeepEqual(res[0].Items, wantItems) {
				t.Errorf("apply --json: %+v\nwant items %+v", res, wantItems)
			}
			e.wantFiles(root, map[string]string{"a.txt": "two!\n", "b.txt": "bee\n", catalog.FileName: ""})
			if got := stampOf(t, filepath.Join(root, "b.txt")); got != bStamp {
				t.Errorf("b.txt was rewritten although its bytes did not change")
			}
			cat2 := e.catalogOf(root)
			e.wantRecords(cat2, srcRecord("a.txt", pipeDaily, "latest", b2, "two!\n"), srcRecord("b.txt", pipeDaily, "latest", b2, "bee\n"))
			for i, o := range cat2.Outputs {
				if !o.CreatedAt.Equal(cat1.Outputs[i].CreatedAt) {
					t.Errorf("%s: created_at %s, want the first run's %s", o.Path, o.CreatedAt, cat1.Outputs[i].CreatedAt)
				}
				if !c.holds(o.UpdatedAt) || !o.UpdatedAt.After(o.CreatedAt) {
					t.Errorf("%s: updated_at %s, want this run's time (after %s)", o.Path, o.UpdatedAt, o.CreatedAt)
				}
			}
			if !cat2.CreatedAt.Equal(cat1.CreatedAt) || !c.holds(cat2.UpdatedAt) || !cat2.UpdatedAt.After(cat1.UpdatedAt) {
				t.Errorf("catalog times %s/%s after %s/%s: want created_at kept, updated_at advanced", cat2.CreatedAt, cat2.UpdatedAt, cat1.CreatedAt, cat1.UpdatedAt)
			}
		})
	}
}

// Rule: when an output path changes owner (another pipeline/destination on
// the same root publishes it), its record keeps created_at, takes the new
// owner and source, and the former owner's other records stay untouched. The
// former owner's scope no longer includes the path: its next replacement
// does not delete it.
func TestRuleOwnerChangeKeepsCreatedAt(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			t.Parallel()
			e := newCLIEnv(t)
			root := e.root("shared")
			e.sharedRoot(root, wf)
			b1 := e.bundle("b1", "weatherreporter.today", map[string]string{"shared.txt": "from daily\n", "one.txt": "1\n"})
			first := e.at(bundleCreated.Add(time.Hour))
			e.apply(pipeDaily, b1)
			cat1 := e.catalogOf(root)
			e.wantCreatedIn(first, cat1, "shared.txt", "one.txt")
			before := cat1.Index()

			// Catalog times have whole seconds: the next run is a second later.
			b2 := e.bundle("b2", "tides.now", map[string]string{"shared.txt": "from tides\n", "two.txt": "2\n"})
			c := e.at(first.from.Add(time.Second))
			out := e.apply(pipeTides, b2)
			if want := fmt.Sprintf("b (%s, %s)\n  ~ shared.txt\n  + two.txt\n  1 create, 1 update, 0 unchanged, 0 delete, 0 collision\n", root, wf); out != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
			}
			cat2 := e.catalogOf(root)
			e.wantRecords(cat2,
				srcRecord("one.txt", pipeDaily, "a", b1, "1\n"),
				srcRecord("shared.txt", pipeTides, "b", b2, "from tides\n"),
				srcRecord("two.txt", pipeTides, "b", b2, "2\n"))
			after := cat2.Index()
			if got := after["shared.txt"]; !got.CreatedAt.Equal(before["shared.txt"].CreatedAt) || !c.holds(got.UpdatedAt) || !got.UpdatedAt.After(got.CreatedAt) {
				t.Errorf("shared.txt: created_at %s updated_at %s; want created_at %s kept and updated_at of this run", got.CreatedAt, got.UpdatedAt, before["shared.txt"].CreatedAt)
			}
			if !reflect.DeepEqual(after["one.txt"], before["one.txt"]) {
				t.Errorf("the former owner's one.txt record changed: %+v -> %+v", before["one.txt"], after["one.txt"])
			}
			e.wantCreatedIn(c, cat2, "two.txt")

			// The former owner republishes without shared.txt: not its output any more.
			b3 := e.bundle("b3", "weatherreporter.today", map[string]string{"one.txt": "1\n"})
			e.apply(pipeDaily, b3)
			e.wantFiles(root, map[string]string{"one.txt": "1\n", "shared.txt": "from tides\n", "two.txt": "2\n", catalog.FileName: ""})
			e.wantRecords(e.catalogOf(root),
				srcRecord("one.txt", pipeDaily, "a", b3, "1\n"),
				srcRecord("shared.txt", pipeTides, "b", b2, "from tides\n"),
				srcRecord("two.txt", pipeTides, "b", b2, "2\n"))
		})
	}
}

// Rules: replacement deletes the owner's managed outputs that are not
// planned (bytes, emptied folders and records); additive retains them. Both
// keep the records of other owners on the same root, unchanged.
func TestRuleUnplannedManagedOutputs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workflow    string
		wantDeleted bool
	}{{"replacement", true}, {"additive", false}} {
		t.Run(tc.workflow, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("shared")
			e.sharedRoot(root, tc.workflow)
			b1 := e.bundle("b1", "weatherreporter.today", map[string]string{"keep.txt": "k\n", "old/gone.txt": "g\n", "old/deep/gone2.txt": "g2\n"})
			e.apply(pipeDaily, b1)
			b2 := e.bundle("b2", "tides.now", map[string]string{"other.txt": "o\n"})
			e.apply(pipeTides, b2)
			before := e.catalogOf(root).Index()

			b3 := e.bundle("b3", "weatherreporter.today", map[string]string{"keep.txt": "k\n"})
			out := e.apply(pipeDaily, b3)

			cat := e.catalogOf(root)
			if !reflect.DeepEqual(cat.Index()["other.txt"], before["other.txt"]) {
				t.Errorf("the other owner's record changed: %+v -> %+v", before["other.txt"], cat.Index()["other.txt"])
			}
			if tc.wantDeleted {
				want := fmt.Sprintf("a (%s, replacement)\n  ~ keep.txt (record only)\n  - old/deep/gone2.txt\n  - old/gone.txt\n  0 create, 1 update, 0 unchanged, 2 delete, 0 collision\n", root)
				if out != want {
					t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
				}
				e.wantFiles(root, map[string]string{"keep.txt": "k\n", "other.txt": "o\n", catalog.FileName: ""})
				if _, err := os.Stat(filepath.Join(root, "old")); !os.IsNotExist(err) {
					t.Errorf("the emptied folder old/ is left: %v", err)
				}
				e.wantRecords(cat, srcRecord("keep.txt", pipeDaily, "a", b3, "k\n"), srcRecord("other.txt", pipeTides, "b", b2, "o\n"))
				return
			}
			e.wantFiles(root, map[string]string{"keep.txt": "k\n", "old/gone.txt": "g\n", "old/deep/gone2.txt": "g2\n", "other.txt": "o\n", catalog.FileName: ""})
			e.wantRecords(cat,
				srcRecord("keep.txt", pipeDaily, "a", b3, "k\n"),
				srcRecord("old/deep/gone2.txt", pipeDaily, "a", b1, "g2\n"),
				srcRecord("old/gone.txt", pipeDaily, "a", b1, "g\n"),
				srcRecord("other.txt", pipeTides, "b", b2, "o\n"))
			for _, p := range []string{"old/gone.txt", "old/deep/gone2.txt"} {
				if !reflect.DeepEqual(cat.Index()[p], before[p]) {
					t.Errorf("retained record %s changed: %+v -> %+v", p, before[p], cat.Index()[p])
				}
			}
		})
	}
}

// Rule: the workflow is runtime policy from the configuration, not state:
// the catalog does not record it and a changed workflow applies at once.
func TestRuleWorkflowIsConfigurationNotState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to    string
		wantDeleted bool
	}{{"additive", "replacement", true}, {"replacement", "additive", false}} {
		t.Run(tc.from+"-then-"+tc.to, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: tc.from})
			b1 := e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
			e.apply(pipeDaily, b1)
			if data, _ := os.ReadFile(filepath.Join(root, catalog.FileName)); strings.Contains(string(data), tc.from) {
				t.Errorf("the catalog mentions the workflow %q:\n%s", tc.from, data)
			}

			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: tc.to})
			b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
			e.apply(pipeDaily, b2)
			want := map[string]string{"a.txt": "a\n", "b.txt": "b\n", catalog.FileName: ""}
			recs := []catalog.Output{srcRecord("a.txt", pipeDaily, "latest", b2, "a\n"), srcRecord("b.txt", pipeDaily, "latest", b1, "b\n")}
			if tc.wantDeleted {
				delete(want, "b.txt")
				recs = recs[:1]
			}
			e.wantFiles(root, want)
			e.wantRecords(e.catalogOf(root), recs...)
		})
	}
}

// Rule: redelivery (the same apply again) is a no-op: nothing is written,
// not even the catalog (same bytes, same mtime and inode), no timestamp
// changes. plan and apply --json report it as unchanged.
func TestRuleRedeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf, Prefix: "{source_name}/", HTML: true, BaseURL: "https://reports.example.com/weather/"})
			b := e.bundle("b", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n\nSunny.\n", "data.csv": "t,21\n"})
			e.apply(pipeDaily, b)
			before := e.snapshot(root)

			out := e.apply(pipeDaily, b)
			if want := fmt.Sprintf("latest (%s, %s)\n  0 create, 0 update, 3 unchanged, 0 delete, 0 collision\n", root, wf); out != want {
				t.Errorf("redelivery stdout:\n%s\nwant:\n%s", out, want)
			}
			e.sameSnapshot("redelivery", before, e.snapshot(root))

			res := e.applyJSON(pipeDaily, b)
			if len(res) != 1 || res[0].Changed || len(res[0].Items) != 3 {
				t.Fatalf("apply --json: %+v", res)
			}
			for _, it := range res[0].Items {
				if it.Action != "unchanged" || it.Write {
					t.Errorf("redelivered item %+v, want unchanged without a write", it)
				}
			}
			out, errOut, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
			if code != 0 || errOut != "" || !strings.HasSuffix(out, "  would create 0, update 0, delete 0; 3 unchanged, 0 collision\n") {
				t.Errorf("plan: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			e.sameSnapshot("second redelivery and plan", before, e.snapshot(root))
		})
	}
}

// Rule: a planned path that exists in storage but not in the catalog is a
// collision: the whole publication to the root is blocked (exit 3), nothing
// is written or deleted, the catalog is unchanged, stderr is one line
// naming the path.
func TestRuleUnmanagedCollisionBlocksPublication(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		for _, managed := range []bool{false, true} {
			name := wf + "/fresh-root"
			if managed {
				name = wf + "/managed-root"
			}
			t.Run(name, func(t *testing.T) {
				e := newCLIEnv(t)
				root := e.root("site")
				e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
				if managed {
					e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "a1\n", "old.txt": "o\n"}))
				}
				e.writeFile(filepath.Join(root, "new", "b.txt"), "hand-made\n")
				b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "a2\n", "new/b.txt": "bundle\n", "c.txt": "c\n"})
				before := e.snapshot(root)

				out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir)
				if code != exitRefused {
					t.Errorf("exit %d, want %d", code, exitRefused)
				}
				stderrLine(t, errOut, fmt.Sprintf(`distributor: collision with unmanaged content in %s: 1 planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): ["new/b.txt"]`, root))
				if !strings.Contains(out, "  ! new/b.txt\n") {
					t.Errorf("stdout does not mark the collision:\n%s", out)
				}
				e.sameSnapshot("a blocked publication", before, e.snapshot(root))
				if !managed {
					if _, err := os.Stat(filepath.Join(root, catalog.FileName)); !os.IsNotExist(err) {
						t.Errorf("a blocked first publication wrote a catalog: %v", err)
					}
				}
			})
		}
	}
}

// Rule: legacy first run (schema_version 2 or 3 in the root). additive
// overwrites the planned paths only and the leftovers become unmanaged (a
// later bundle desiring one collides); replacement clears the root first
// (inside the root only). Both write a v4 catalog of exactly the planned
// outputs.
func TestRuleLegacyFirstRun(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		for _, schema := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/v%d", wf, schema), func(t *testing.T) {
				e := newCLIEnv(t)
				root := e.root("site")
				outside := filepath.Join(filepath.Dir(root), "outside.txt")
				e.writeFile(outside, "not in the root\n")
				e.legacyRoot(root, schema)
				e.writeFile(filepath.Join(root, "planned.txt"), "old\n")
				e.writeFile(filepath.Join(root, "leftover.txt"), "left\n")
				e.writeFile(filepath.Join(root, "sub", "leftover2.txt"), "left2\n")
				leftStamp := stampOf(t, filepath.Join(root, "leftover.txt"))
				outStamp := stampOf(t, outside)
				e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
				b := e.bundle("b", "weatherreporter.today", map[string]string{"planned.txt": "new\n", "fresh.txt": "fresh\n"})

				c := startClock()
				res := e.applyJSON(pipeDaily, b)
				c = c.stop()

				var wantClear []string
				want := map[string]string{"planned.txt": "new\n", "fresh.txt": "fresh\n", catalog.FileName: ""}
				if wf == "replacement" {
					wantClear = []string{"leftover.txt", "sub/leftover2.txt"}
				} else {
					want["leftover.txt"], want["sub/leftover2.txt"] = "left\n", "left2\n"
				}
				if len(res) != 1 || !reflect.DeepEqual(res[0].Clear, wantClear) || res[0].Error != "" {
					t.Errorf("apply --json: %+v, want clear %q", res, wantClear)
				}
				e.wantFiles(root, want)
				cat := e.catalogOf(root)
				e.wantRecords(cat, srcRecord("planned.txt", pipeDaily, "latest", b, "new\n"), srcRecord("fresh.txt", pipeDaily, "latest", b, "fresh\n"))
				e.wantCreatedIn(c, cat, "planned.txt", "fresh.txt")
				if !c.holds(cat.CreatedAt) {
					t.Errorf("catalog created_at %s: want the first v4 run's time", cat.CreatedAt)
				}
				if got := stampOf(t, outside); got != outStamp {
					t.Errorf("a file outside the root was touched")
				}
				if wf == "replacement" {
					if _, err := os.Stat(filepath.Join(root, "sub")); !os.IsNotExist(err) {
						t.Errorf("the cleared folder sub/ is left: %v", err)
					}
					return
				}
				if got := stampOf(t, filepath.Join(root, "leftover.txt")); got != leftStamp {
					t.Errorf("additive legacy run touched the unplanned leftover.txt")
				}
				// The leftover is unmanaged now: desiring it collides.
				b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"planned.txt": "new\n", "fresh.txt": "fresh\n", "leftover.txt": "mine\n"})
				before := e.snapshot(root)
				_, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir)
				if code != exitRefused {
					t.Errorf("desiring a legacy leftover: exit %d, want %d", code, exitRefused)
				}
				stderrLine(t, errOut, fmt.Sprintf(`distributor: collision with unmanaged content in %s: 1 planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): ["leftover.txt"]`, root))
				e.sameSnapshot("the colliding second run", before, e.snapshot(root))
			})
		}
	}
}

// Rule (DESIGN safety): a replacement that desires nothing while its owner
// has outputs (or a legacy root has content) is refused with exit 3 and
// nothing changes; additive with nothing to publish changes nothing either.
func TestRuleEmptyReplacementRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		workflow string
		legacy   bool
		exclude  bool // every bundle file excluded instead of an empty bundle
		fresh    bool // no earlier publication
		wantCode int
	}{
		{name: "replacement/empty-bundle", workflow: "replacement", wantCode: exitRefused},
		{name: "replacement/everything-excluded", workflow: "replacement", exclude: true, wantCode: exitRefused},
		{name: "replacement/legacy-root", workflow: "replacement", legacy: true, wantCode: exitRefused},
		{name: "additive/empty-bundle", workflow: "additive", wantCode: exitOK},
		{name: "additive/everything-excluded", workflow: "additive", exclude: true, wantCode: exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			dest := destSpec{ID: "latest", Root: root, Workflow: tc.workflow}
			e.oneDest(pipeDaily, dest)
			full := e.bundle("full", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"})
			if tc.legacy {
				e.legacyRoot(root, 3)
				e.writeFile(filepath.Join(root, "a.txt"), "legacy\n")
			} else {
				e.apply(pipeDaily, full)
			}
			next := e.bundle("empty", "weatherreporter.today", map[string]string{})
			if tc.exclude {
				dest.Exclude = []string{"**"}
				e.oneDest(pipeDaily, dest)
				next = full
			}
			before := e.snapshot(root)

			out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", next.Dir)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stdout:\n%s", code, tc.wantCode, out)
			}
			if tc.wantCode == exitRefused {
				stderrLine(t, errOut, fmt.Sprintf("distributor: %s: refused: replacement publication desires no outputs and would delete every output of its owner", root))
			} else if errOut != "" {
				t.Errorf("stderr: %q", errOut)
			}
			e.sameSnapshot("an empty publication", before, e.snapshot(root))
		})
	}
}

// Rule (DESIGN safety): a delete set larger than max_deletes aborts the run
// (exit 3) with nothing deleted or written; legacy clearing counts; additive
// never deletes.
func TestRuleMaxDeletesAbortsWithNothingDeleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		workflow string
		legacy   bool
		unplan   int // managed (or legacy) paths the second bundle leaves out
		wantCode int
	}{
		{name: "replacement/over", workflow: "replacement", unplan: 3, wantCode: exitRefused},
		{name: "replacement/at-limit", workflow: "replacement", unplan: 2, wantCode: exitOK},
		{name: "replacement/legacy-clear-over", workflow: "replacement", legacy: true, unplan: 3, wantCode: exitRefused},
		{name: "additive/never-deletes", workflow: "additive", unplan: 3, wantCode: exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: tc.workflow, MaxDeletes: 2})
			files := map[string]string{"keep.txt": "k\n"}
			for i := range tc.unplan {
				files[fmt.Sprintf("d%d.txt", i)] = fmt.Sprintf("d%d\n", i)
			}
			if tc.legacy {
				e.legacyRoot(root, 2)
				for p, c := range files {
					e.writeFile(filepath.Join(root, p), c)
				}
			} else {
				e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", files))
			}
			b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"keep.txt": "k2\n"})
			before := e.snapshot(root)

			_, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.wantCode, errOut)
			}
			want := map[string]string{"keep.txt": "k2\n", catalog.FileName: ""}
			switch {
			case tc.wantCode == exitRefused:
				stderrLine(t, errOut, fmt.Sprintf("distributor: %s: refused: delete set exceeds max_deletes: %d deletes, max_deletes is 2; nothing was deleted", root, tc.unplan))
				e.sameSnapshot("an aborted publication", before, e.snapshot(root))
				return
			case tc.workflow == "additive":
				for p, c := range files {
					if p != "keep.txt" {
						want[p] = c
					}
				}
			}
			e.wantFiles(root, want)
		})
	}
}

// Rule: --take-ownership adopts exactly the colliding paths, names them in
// the output, and leaves other unmanaged content unmanaged and untouched.
func TestRuleTakeOwnershipAdoptsOnlyCollidingPaths(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "a\n"}))
			e.writeFile(filepath.Join(root, "b.txt"), "hand\n")
			e.writeFile(filepath.Join(root, "stray.txt"), "stray\n")
			strayStamp := stampOf(t, filepath.Join(root, "stray.txt"))
			b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "bundle b\n"})

			if _, _, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir); code != exitRefused {
				t.Fatalf("without --take-ownership: exit %d, want %d", code, exitRefused)
			}
			out := e.apply(pipeDaily, b2, "--take-ownership")
			want := fmt.Sprintf("latest (%s, %s)\n  ~ a.txt (record only)\n  + b.txt (adopted: --take-ownership)\n  1 create, 1 update, 0 unchanged, 0 delete, 0 collision\n", root, wf)
			if out != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
			}
			e.wantFiles(root, map[string]string{"a.txt": "a\n", "b.txt": "bundle b\n", "stray.txt": "stray\n", catalog.FileName: ""})
			e.wantRecords(e.catalogOf(root), srcRecord("a.txt", pipeDaily, "latest", b2, "a\n"), srcRecord("b.txt", pipeDaily, "latest", b2, "bundle b\n"))
			if stampOf(t, filepath.Join(root, "stray.txt")) != strayStamp {
				t.Errorf("stray.txt was touched")
			}
		})
	}
}

// Rule: the catalog has exactly the seed's shape: no top-level pipeline_id,
// destination_id, published_at, workflow, owners or sources; copied sources
// omit source_path and transform; generated HTML carries them; url only
// with links.base_url. The file is the deterministic Marshal form.
func TestRuleCatalogShape(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		for _, links := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/links=%t", wf, links), func(t *testing.T) {
				e := newCLIEnv(t)
				root := e.root("site")
				d := destSpec{ID: "latest", Root: root, Workflow: wf, Prefix: "{source_name}/", HTML: true}
				if links {
					d.BaseURL = "https://reports.example.com/weather/"
				}
				e.oneDest(pipeDaily, d)
				b := e.bundle("b", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n\nSunny.\n", "img/sun.txt": "☀\n"})
				e.apply(pipeDaily, b)

				data, err := os.ReadFile(filepath.Join(root, catalog.FileName))
				if err != nil {
					t.Fatal(err)
				}
				var doc map[string]json.RawMessage
				if err := json.Unmarshal(data, &doc); err != nil {
					t.Fatal(err)
				}
				if got, want := keysOf(doc), "created_at distributor_version outputs schema_version state updated_at"; got != want {
					t.Errorf("top-level keys %q, want %q", got, want)
				}
				if string(doc["schema_version"]) != "4" || string(doc["distributor_version"]) != `"dev"` {
					t.Errorf("schema_version %s, distributor_version %s", doc["schema_version"], doc["distributor_version"])
				}
				var state map[string]string
				if err := json.Unmarshal(doc["state"], &state); err != nil || !reflect.DeepEqual(state, map[string]string{"mode": "catalog"}) {
					t.Errorf("state %s", doc["state"])
				}
				var outs []map[string]json.RawMessage
				if err := json.Unmarshal(doc["outputs"], &outs); err != nil {
					t.Fatal(err)
				}
				url := ""
				if links {
					url = " url"
				}
				wantKeys := map[string]string{
					"tomorrow/img/sun.txt": "created_at destination_id kind path pipeline_id sha256 size source updated_at" + url,
					"tomorrow/index.html":  "created_at destination_id kind path pipeline_id sha256 size source source_path transform updated_at" + url,
					"tomorrow/report.md":   "created_at destination_id kind path pipeline_id sha256 size source updated_at" + url,
				}
				if len(outs) != len(wantKeys) {
					t.Fatalf("%d outputs, want %d", len(outs), len(wantKeys))
				}
				for _, o := range outs {
					var p string
					_ = json.Unmarshal(o["path"], &p)
					if got := keysOf(o); got != wantKeys[p] {
						t.Errorf("%s: keys %q, want %q", p, got, wantKeys[p])
					}
					var src map[string]json.RawMessage
					if err := json.Unmarshal(o["source"], &src); err != nil || keysOf(src) != "created digest id" {
						t.Errorf("%s: source %s", p, o["source"])
					}
				}

				html, err := os.ReadFile(filepath.Join(root, "tomorrow", "index.html"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(html), "Sunny.") {
					t.Errorf("index.html does not hold the rendered report:\n%s", html)
				}
				gen := catalog.Output{Path: "tomorrow/index.html", PipelineID: pipeDaily, DestinationID: "latest", Source: b.source(),
					Kind: catalog.KindGenerated, SourcePath: "report.md", Transform: "markdown_to_html", SHA256: sha(string(html)), Size: int64(len(html))}
				img := srcRecord("tomorrow/img/sun.txt", pipeDaily, "latest", b, "☀\n")
				rep := srcRecord("tomorrow/report.md", pipeDaily, "latest", b, "# Tomorrow\n\nSunny.\n")
				if links {
					gen.URL = "https://reports.example.com/weather/tomorrow/"
					img.URL = "https://reports.example.com/weather/tomorrow/img/sun.txt"
					rep.URL = "https://reports.example.com/weather/tomorrow/report.md"
				}
				e.wantRecords(e.catalogOf(root), gen, img, rep)
			})
		}
	}
}

func keysOf[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// Rule: bytes are rewritten only when the sha256 differs or the stored
// object is missing or has another size; a record whose content did not
// change is not touched. Stored bytes that are not the recorded ones count
// as a differing sha256: a publication notices a replaced file by its
// fingerprint (inode, size, mtime) and repairs it, while a file replaced by
// the very same bytes is hashed once and left alone.
func TestRuleBytesRewrittenOnlyWhenDigestOrSizeDiffers(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			files := map[string]string{"same.txt": "same\n", "gone.txt": "gone\n", "resized.txt": "resized\n", "rotted.txt": "rotted\n", "copied.txt": "copied\n"}
			b := e.bundle("b", "weatherreporter.today", files)
			e.apply(pipeDaily, b)
			before := e.catalogOf(root).Index()
			sameStamp := stampOf(t, filepath.Join(root, "same.txt"))
			if err := os.Remove(filepath.Join(root, "gone.txt")); err != nil {
				t.Fatal(err)
			}
			e.writeFile(filepath.Join(root, "resized.txt"), "resized, longer\n")
			e.writeFile(filepath.Join(root, "rotted.txt"), "ROTTED\n")
			// The same bytes under a new inode and time.
			if err := os.Remove(filepath.Join(root, "copied.txt")); err != nil {
				t.Fatal(err)
			}
			e.writeFile(filepath.Join(root, "copied.txt"), "copied\n")
			copiedStamp := stampOf(t, filepath.Join(root, "copied.txt"))

			res := e.applyJSON(pipeDaily, b)
			got := map[string]string{}
			for _, it := range res[0].Items {
				got[it.Path] = fmt.Sprintf("%s write=%t", it.Action, it.Write)
			}
			want := map[string]string{"same.txt": "unchanged write=false", "copied.txt": "unchanged write=false",
				"gone.txt": "update write=true", "resized.txt": "update write=true", "rotted.txt": "update write=true"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("items %v, want %v", got, want)
			}
			e.wantFiles(root, map[string]string{"same.txt": "same\n", "gone.txt": "gone\n", "resized.txt": "resized\n", "rotted.txt": "rotted\n", "copied.txt": "copied\n", catalog.FileName: ""})
			if stampOf(t, filepath.Join(root, "same.txt")) != sameStamp || stampOf(t, filepath.Join(root, "copied.txt")) != copiedStamp {
				t.Errorf("an output whose stored bytes match its record was rewritten")
			}
			after := e.catalogOf(root).Index()
			for _, p := range []string{"same.txt", "copied.txt"} {
				if !reflect.DeepEqual(after[p], before[p]) {
					t.Errorf("%s: record changed %+v -> %+v", p, before[p], after[p])
				}
			}
			for _, p := range []string{"gone.txt", "resized.txt", "rotted.txt"} {
				if !after[p].SameContent(before[p]) || !after[p].CreatedAt.Equal(before[p].CreatedAt) {
					t.Errorf("%s: rewritten record %+v, want %+v with its created_at", p, after[p], before[p])
				}
			}
		})
	}
}

// Cost rule: republishing a bundle where 1 of 100 files changed writes
// exactly that file. The 99 other outputs keep their inode and mtime and are
// not even read from the bundle: their bundle copies are removed after
// `bundle create`, so any read or stat of them would fail the run.
func TestRuleRepublishWritesOnlyChangedFiles(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			files := map[string]string{}
			for i := range 100 {
				files[fmt.Sprintf("f/%03d.txt", i)] = fmt.Sprintf("file %d\n", i)
			}
			e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", files))
			cat1 := e.catalogOf(root).Index()
			stamps := map[string]fileStamp{}
			for p := range files {
				stamps[p] = stampOf(t, filepath.Join(root, filepath.FromSlash(p)))
			}

			files["f/042.txt"] = "file 42, changed\n"
			b2 := e.bundle("b2", "weatherreporter.today", files)
			for p := range files {
				if p != "f/042.txt" {
					if err := os.Remove(filepath.Join(b2.Dir, filepath.FromSlash(p))); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := e.applyJSON(pipeDaily, b2)

			var writes []string
			for _, it := range res[0].Items {
				if it.Write {
					writes = append(writes, it.Path)
				}
				if it.Action != "update" {
					t.Errorf("%s: action %s, want update (new source)", it.Path, it.Action)
				}
			}
			if !reflect.DeepEqual(writes, []string{"f/042.txt"}) || len(res[0].Items) != 100 {
				t.Errorf("%d items, writes %q; want 100 items and exactly one write", len(res[0].Items), writes)
			}
			for p, st := range stamps {
				changed := stampOf(t, filepath.Join(root, filepath.FromSlash(p))) != st
				if changed != (p == "f/042.txt") {
					t.Errorf("%s: rewritten %t", p, changed)
				}
			}
			e.wantFiles(root, func() map[string]string {
				w := map[string]string{catalog.FileName: ""}
				for p, c := range files {
					w[p] = c
				}
				return w
			}())
			for p, o := range e.catalogOf(root).Index() {
				if o.Source != b2.source() || o.SHA256 != sha(files[p]) || !o.CreatedAt.Equal(cat1[p].CreatedAt) {
					t.Errorf("%s: record %+v", p, o)
				}
			}
		})
	}
}

// plan computes without changing anything: not even the lock object or the
// reserved folder appears in a fresh root. A collision shows in the plan.
func TestPlanChangesNothing(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			e.writeFile(filepath.Join(root, "b.txt"), "hand\n")
			b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
			before := e.snapshot(root)

			// A plan that apply would refuse exits like apply: 3.
			out, errOut, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
			wantErr := fmt.Sprintf("distributor: collision with unmanaged content in %s: apply would write nothing there: 1 planned path(s) are blocked by content distributor does not manage\n", root)
			// The error is on stderr only; stdout says "would", and counts
			// what apply would then do: nothing but the collision.
			want := fmt.Sprintf("latest (%s, %s)\n  ! b.txt\n  would create 0, update 0, delete 0; 0 unchanged, 1 collision\n  apply would write nothing\n", root, wf)
			if code != exitRefused || errOut != wantErr || out != want {
				t.Errorf("plan: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
			}
			e.sameSnapshot("plan", before, e.snapshot(root))
			if ents, _ := os.ReadDir(root); len(ents) != 1 {
				t.Errorf("plan left %d entries in the root, want only b.txt", len(ents))
			}
		})
	}
}

// Bad configuration and usage: exit 2, one exact line, the root untouched.
func TestBadConfigAndUsageChangeNothing(t *testing.T) {
	t.Parallel()
	const head = "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: weatherreporter.daily\n    destinations: [latest]\ndestinations:\n  - id: latest\n    backend: local\n    path: %q\n"
	for _, tc := range []struct {
		name  string
		extra string   // YAML appended to the destination; "" = the good config
		args  []string // after --config; %s in an arg is the bundle dir
		line  string   // %[1]s = config file, %[2]s = root
	}{
		{name: "legacy-state-key", extra: "    state: {mode: shared_root}\n",
			line: `distributor: %[1]s:10: destinations[0] (latest): "state" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{name: "legacy-reconciliation-key", extra: "    workflow: replacement\n    reconciliation:\n      mode: mirror\n",
			line: `distributor: %[1]s:11: destinations[0] (latest): "reconciliation" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{name: "legacy-takeover-key", extra: "    takeover: {mode: force}\n",
			line: `distributor: %[1]s:10: destinations[0] (latest): "takeover" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{name: "unknown-workflow", extra: "    workflow: sideways\n",
			line: `distributor: %[1]s:10: destinations[0] (latest): unknown workflow "sideways": use "replacement" or "additive"`},
		{name: "unknown-pipeline", args: []string{"apply", "--pipeline", "nope", "--bundle", "%s"},
			line: `distributor: unknown pipeline "nope": known pipelines: weatherreporter.daily`},
		{name: "missing-pipeline", args: []string{"apply", "--bundle", "%s"}, line: "distributor: --pipeline is required"},
		{name: "missing-bundle", args: []string{"apply", "--pipeline", pipeDaily}, line: "distributor: --bundle is required"},
		{name: "unknown-destination", args: []string{"apply", "--pipeline", pipeDaily, "--bundle", "%s", "--destination", "elsewhere"},
			line: `distributor: unknown destination "elsewhere": pipeline "weatherreporter.daily" publishes to [latest]`},
		{name: "unknown-flag", args: []string{"apply", "--pipeline", pipeDaily, "--bundle", "%s", "--force"},
			line: "distributor: unknown flag: --force"},
		{name: "plan-missing-pipeline", args: []string{"plan", "--bundle", "%s"}, line: "distributor: --pipeline is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.writeFile(e.cfg, fmt.Sprintf(head, root))
			b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
			e.apply(pipeDaily, e.bundle("b0", "weatherreporter.today", map[string]string{"old.txt": "old\n"}))
			if tc.extra != "" {
				e.writeFile(e.cfg, fmt.Sprintf(head, root)+tc.extra)
			}
			before := e.snapshot(root)
			runs := [][]string{tc.args}
			if tc.args == nil {
				runs = [][]string{{"apply", "--pipeline", pipeDaily, "--bundle", "%s"}, {"config", "validate"}}
			}
			for _, args := range runs {
				args = append([]string(nil), args...)
				for i, a := range args {
					if a == "%s" {
						args[i] = b.Dir
					}
				}
				out, errOut, code := e.run(args...)
				if code != exitUsage || out != "" {
					t.Errorf("%q: exit %d (want %d), stdout %q", args, code, exitUsage, out)
				}
				stderrLine(t, errOut, fillLine(tc.line, e.cfg, root))
			}
			e.sameSnapshot(tc.name, before, e.snapshot(root))
		})
	}
}

// An invalid or newer catalog refuses every publication (exit 3) and is
// never overwritten; plan and catalog show refuse it too.
func TestUnreadableCatalogRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(valid string) string
		line string // %s = root
	}{
		{"not-json", func(string) string { return "{not json" },
			`.distributor.json in %s: invalid catalog: not a JSON object: invalid character 'n' looking for beginning of object key string`},
		{"newer", func(string) string { return `{"schema_version": 5, "outputs": []}` },
			`.distributor.json in %s: catalog written by a newer distributor (schema_version 5; this one reads 4): upgrade distributor`},
		{"source-with-transform", func(v string) string {
			return strings.Replace(v, `"kind": "source",`, `"kind": "source", "transform": "markdown_to_html",`, 1)
		}, `.distributor.json in %s: invalid catalog: outputs[0]: "a.txt": a source output carries no source_path or transform`},
		{"missing-updated-at", func(v string) string {
			return strings.Replace(v, "  \"updated_at\"", "  \"updated\"", 1)
		}, `.distributor.json in %s: invalid catalog: json: unknown field "updated"`},
		// encoding/json would keep the last value and read legacy state,
		// which a replacement run clears.
		{"duplicate-schema-version", func(v string) string {
			return strings.Replace(v, `"schema_version": 4,`, `"schema_version": 4, "schema_version": 3,`, 1)
		}, `.distributor.json in %s: invalid catalog: duplicate key "schema_version": a key may appear once per object; fix the file by hand (which value is meant cannot be guessed)`},
		{"duplicate-key-in-source", func(v string) string {
			return strings.Replace(v, `"id": "weatherreporter.today",`, `"id": "weatherreporter.today", "id": "other",`, 1)
		}, `.distributor.json in %s: invalid catalog: duplicate key "id" in outputs[0].source: a key may appear once per object; fix the file by hand (which value is meant cannot be guessed)`},
	} {
		for _, wf := range bothWorkflows {
			t.Run(tc.name+"/"+wf, func(t *testing.T) {
				e := newCLIEnv(t)
				root := e.root("site")
				e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
				e.apply(pipeDaily, e.bundle("b0", "weatherreporter.today", map[string]string{"a.txt": "a\n"}))
				name := filepath.Join(root, catalog.FileName)
				valid, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				e.writeFile(name, tc.edit(string(valid)))
				b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a2\n", "b.txt": "b\n"})
				before := e.snapshot(root)

				for _, args := range [][]string{
					{"apply", "--pipeline", pipeDaily, "--bundle", b.Dir},
					{"apply", "--pipeline", pipeDaily, "--bundle", b.Dir, "--take-ownership"},
					{"plan", "--pipeline", pipeDaily, "--bundle", b.Dir},
					{"catalog", "show", "--destination", "latest"},
				} {
					_, errOut, code := e.run(args...)
					if code != exitRefused {
						t.Errorf("%q: exit %d, want %d", args, code, exitRefused)
					}
					stderrLine(t, errOut, "distributor: "+fmt.Sprintf(tc.line, root))
				}
				e.sameSnapshot("runs against an unreadable catalog", before, e.snapshot(root))
			})
		}
	}
}

// catalog show prints the root's catalog (filtered by owner) as a table or
// as the catalog's own JSON; config validate summarises the configuration.
func TestCatalogShowAndConfigValidate(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root, empty := e.root("shared"), e.root("empty")
	e.writeConfig(
		[]pipeSpec{{pipeDaily, []string{"a"}}, {pipeTides, []string{"b"}}},
		[]destSpec{{ID: "a", Root: root, Workflow: "replacement"}, {ID: "b", Root: root}, {ID: "c", Root: empty, Workflow: "additive"}},
	)
	out, errOut, code := e.run("config", "validate")
	want := fmt.Sprintf("%s: ok, 2 pipeline(s), 3 destination(s)\n  a                    replacement file://%s/\n  b                    additive    file://%s/\n  c                    additive    file://%s/\n", e.cfg, root, root, empty)
	if code != 0 || errOut != "" || out != want {
		t.Errorf("config validate: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}

	e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{"one.txt": "1\n", "two.txt": "22\n"}))
	e.apply(pipeTides, e.bundle("b2", "tides.now", map[string]string{"tide.txt": "333\n"}))
	cat := e.catalogOf(root)
	file, _ := os.ReadFile(filepath.Join(root, catalog.FileName))

	out, errOut, code = e.run("catalog", "show", "--destination", "b", "--json")
	if code != 0 || errOut != "" || out != string(file) {
		t.Errorf("catalog show --json: exit %d, stderr %q; want the catalog file's bytes, got:\n%s", code, errOut, out)
	}
	out, _, code = e.run("catalog", "show", "--destination", "a", "--pipeline", pipeTides, "--json")
	sub, legacy, err := catalog.Parse([]byte(out))
	if code != 0 || err != nil || legacy || len(sub.Outputs) != 1 || sub.Outputs[0] != cat.Index()["tide.txt"] {
		t.Errorf("catalog show --pipeline --json: exit %d, %v:\n%s", code, err, out)
	}
	out, _, code = e.run("catalog", "show", "--destination", "a", "--owner-destination", "a")
	ts := func(p string) string { return catalog.FormatTime(cat.Index()[p].UpdatedAt) }
	src := func(p string) string {
		s := cat.Index()[p].Source
		return s.ID + "@" + catalog.FormatTime(s.Created) + " " + s.Digest[:len("sha256:")+12]
	}
	want = fmt.Sprintf("PATH     PIPELINE               DESTINATION  KIND    SIZE  UPDATED               SOURCE\n"+
		"one.txt  weatherreporter.daily  a            source  2     %s  %s\n"+
		"two.txt  weatherreporter.daily  a            source  3     %s  %s\n"+
		"2 of 3 output(s); catalog updated %s\n", ts("one.txt"), src("one.txt"), ts("two.txt"), src("two.txt"), catalog.FormatTime(cat.UpdatedAt))
	if code != 0 || out != want {
		t.Errorf("catalog show: exit %d, stdout:\n%s\nwant:\n%s", code, out, want)
	}

	for _, tc := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"catalog", "show", "--destination", "c"}, exitFailed,
			fmt.Sprintf("distributor: %s has no .distributor.json yet: nothing has been published there", empty)},
		{[]string{"catalog", "show", "--destination", "zzz"}, exitUsage, `distributor: unknown destination "zzz": it is not in the configuration (known destinations: a, b, c)`},
		{[]string{"catalog", "show"}, exitUsage, "distributor: --destination is required"},
	} {
		out, errOut, code := e.run(tc.args...)
		if code != tc.code || out != "" {
			t.Errorf("%q: exit %d (want %d), stdout %q", tc.args, code, tc.code, out)
		}
		stderrLine(t, errOut, tc.line)
	}
	e.legacyRoot(empty, 3)
	_, errOut, code = e.run("catalog", "show", "--destination", "c")
	if code != exitFailed {
		t.Errorf("catalog show on legacy state: exit %d", code)
	}
	stderrLine(t, errOut, fmt.Sprintf("distributor: .distributor.json in %s is superseded legacy state (schema_version < 4); the next publication replaces it", empty))
}

// Rule: a managed file may become a folder and back (issue: a managed file
// "docs" whose next bundle has "docs/index.txt" was refused as a collision
// that not even --take-ownership could resolve). The managed output in the
// way is deleted before the write, reported as a delete, and leaves the
// catalog. Unmanaged content in the way still blocks, with
// --take-ownership too, and the message says to remove it.
func TestRuleManagedFileBecomesFolderAndBack(t *testing.T) {
	t.Parallel()
	for _, wf := range bothWorkflows {
		t.Run(wf, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: wf})
			e.apply(pipeDaily, e.bundle("b1", "weatherreporter.v1", map[string]string{"docs": "file\n", "keep.txt": "k\n"}))

			b2 := e.bundle("b2", "weatherreporter.v2", map[string]string{"docs/index.txt": "index\n", "keep.txt": "k\n"})
			out := e.apply(pipeDaily, b2)
			want := fmt.Sprintf("latest (%s, %s)\n  - docs (in the way of a planned path)\n  + docs/index.txt\n  ~ keep.txt (record only)\n  1 create, 1 update, 0 unchanged, 1 delete, 0 collision\n", root, wf)
			if out != want {
				t.Errorf("file -> folder stdout:\n%s\nwant:\n%s", out, want)
			}
			e.wantFiles(root, map[string]string{"docs/index.txt": "index\n", "keep.txt": "k\n", catalog.FileName: ""})
			e.wantRecords(e.catalogOf(root), srcRecord("docs/index.txt", pipeDaily, "latest", b2, "index\n"), srcRecord("keep.txt", pipeDaily, "latest", b2, "k\n"))

			b3 := e.bundle("b3", "weatherreporter.v3", map[string]string{"docs": "file again\n", "keep.txt": "k\n"})
			out = e.apply(pipeDaily, b3)
			want = fmt.Sprintf("latest (%s, %s)\n  + docs\n  - docs/index.txt (in the way of a planned path)\n  ~ keep.txt (record only)\n  1 create, 1 update, 0 unchanged, 1 delete, 0 collision\n", root, wf)
			if out != want {
				t.Errorf("folder -> file stdout:\n%s\nwant:\n%s", out, want)
			}
			e.wantFiles(root, map[string]string{"docs": "file again\n", "keep.txt": "k\n", catalog.FileName: ""})
			e.wantRecords(e.catalogOf(root), srcRecord("docs", pipeDaily, "latest", b3, "file again\n"), srcRecord("keep.txt", pipeDaily, "latest", b3, "k\n"))

			// An unmanaged file where a folder is needed: refused, even
			// with --take-ownership, and nothing changes.
			e.writeFile(filepath.Join(root, "notes"), "hand-made\n")
			b4 := e.bundle("b4", "weatherreporter.v4", map[string]string{"notes/today.txt": "t\n", "keep.txt": "k\n"})
			before := e.snapshot(root)
			out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b4.Dir, "--take-ownership")
			if code != exitRefused {
				t.Errorf("exit %d, want %d", code, exitRefused)
			}
			stderrLine(t, errOut, fmt.Sprintf(`distributor: collision with unmanaged content in %s: 1 planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): ["notes/today.txt"], in the way: ["notes"]`, root))
			if !strings.Contains(out, "  ! notes/today.txt (unmanaged in the way: notes)\n") {
				t.Errorf("stdout does not name what is in the way:\n%s", out)
			}
			e.sameSnapshot("a blocked publication", before, e.snapshot(root))
		})
	}
}

// Rule: newest wins per owner and source. A bundle older than the version
// of its source the destination holds changes nothing: plan and apply say
// so in one line and exit 3; --allow-older rolls back on purpose.
// Rule: newest wins per path in additive. An older bundle writes the paths
// no newer version of its source wrote and keeps the others (counted, not
// listed); exit 0, plan and apply agree.
func TestRuleOlderBundleInAdditiveKeepsNewerPaths(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	older := e.bundle("v1", "weatherreporter.today", map[string]string{"a.txt": "one\n", "old.txt": "old\n"})
	newer := e.bundle("v2", "weatherreporter.today", map[string]string{"a.txt": "two\n", "new.txt": "new\n"})
	e.apply(pipeDaily, newer)
	kept := e.catalogOf(root)

	out, _, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", older.Dir)
	if want := fmt.Sprintf("latest (%s, additive)\n  + old.txt\n  would create 1, update 0, delete 0; 0 unchanged, 0 collision; 1 kept (a newer version of the owner wrote them)\n", root); code != exitOK || out != want {
		t.Errorf("plan of the older bundle: exit %d, stdout:\n%s\nwant:\n%s", code, out, want)
	}
	out, _, code = e.run("plan", "--json", "--pipeline", pipeDaily, "--bundle", older.Dir)
	var res []resultJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || len(res) != 1 || res[0].SupersededBy != nil ||
		res[0].Counts != (counts{Create: 1, KeptNewer: 1}) || len(res[0].Items) != 2 || res[0].Items[0].Action != "kept_newer" || res[0].Items[0].Write {
		t.Errorf("plan --json: exit %d, %s", code, out)
	}
	out = e.apply(pipeDaily, older)
	if want := fmt.Sprintf("latest (%s, additive)\n  + old.txt\n  1 create, 0 update, 0 unchanged, 0 delete, 0 collision; 1 kept (a newer version of the owner wrote them)\n", root); out != want {
		t.Errorf("apply stdout:\n%s\nwant:\n%s", out, want)
	}
	e.wantFiles(root, map[string]string{"a.txt": "two\n", "new.txt": "new\n", "old.txt": "old\n", catalog.FileName: ""})
	after := e.catalogOf(root)
	e.wantRecords(after, srcRecord("a.txt", pipeDaily, "latest", newer, "two\n"),
		srcRecord("new.txt", pipeDaily, "latest", newer, "new\n"), srcRecord("old.txt", pipeDaily, "latest", older, "old\n"))
	if got, want := mustLookup(t, after, "a.txt"), mustLookup(t, kept, "a.txt"); got != want {
		t.Errorf("the kept record changed: %+v, was %+v", got, want)
	}
}

func mustLookup(t *testing.T, c *catalog.Catalog, path string) catalog.Output {
	t.Helper()
	o, ok := c.Lookup(path)
	if !ok {
		t.Fatalf("no record for %s", path)
	}
	return o
}

func TestRuleOlderBundleIsSuperseded(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "replacement"})
	older := e.bundle("v1", "weatherreporter.today", map[string]string{"a.txt": "one\n", "old.txt": "old\n"})
	newer := e.bundle("v2", "weatherreporter.today", map[string]string{"a.txt": "two\n", "new.txt": "new\n"})
	e.apply(pipeDaily, newer)
	before := e.snapshot(root)

	line := fmt.Sprintf("superseded: %s/latest in %s already has weatherreporter.today created %s (digest %s), newer than this bundle's created %s (digest %s); nothing changed; use --allow-older to roll back",
		pipeDaily, root, catalog.FormatTime(newer.Created), newer.Digest, catalog.FormatTime(older.Created), older.Digest)
	for _, cmd := range []string{"apply", "plan"} {
		out, errOut, code := e.run(cmd, "--pipeline", pipeDaily, "--bundle", older.Dir)
		if code != exitRefused {
			t.Errorf("%s of the older bundle: exit %d, want %d", cmd, code, exitRefused)
		}
		if want := fmt.Sprintf("latest (%s, replacement)\n  %s\n", root, line); out != want {
			t.Errorf("%s stdout:\n%s\nwant:\n%s", cmd, out, want)
		}
		stderrLine(t, errOut, "distributor: "+line)
		e.sameSnapshot(cmd+" of the older bundle", before, e.snapshot(root))
	}
	out, _, code := e.run("plan", "--json", "--pipeline", pipeDaily, "--bundle", older.Dir)
	var res []resultJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitRefused || len(res) != 1 ||
		res[0].SupersededBy == nil || *res[0].SupersededBy != newer.source() || res[0].Changed || len(res[0].Items) != 0 {
		t.Errorf("plan --json: exit %d, %s", code, out)
	}

	out = e.apply(pipeDaily, older, "--allow-older")
	if want := fmt.Sprintf("latest (%s, replacement)\n  ~ a.txt\n  - new.txt\n  + old.txt\n  1 create, 1 update, 0 unchanged, 1 delete, 0 collision\n", root); out != want {
		t.Errorf("apply --allow-older stdout:\n%s\nwant:\n%s", out, want)
	}
	e.wantFiles(root, map[string]string{"a.txt": "one\n", "old.txt": "old\n", catalog.FileName: ""})
	e.wantRecords(e.catalogOf(root),
		srcRecord("a.txt", pipeDaily, "latest", older, "one\n"), srcRecord("old.txt", pipeDaily, "latest", older, "old\n"))
}
