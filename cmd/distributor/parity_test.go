package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// `plan` counts what `apply` then does, in every situation: a blocked or
// superseded plan counts no writes or deletes (only the collisions), like
// the apply it predicts. Each scenario plans on a root, then applies to a
// copy of it (the same state), and compares the counts of the two --json
// reports, and both with the exact expected counts.
func TestPlanCountsEqualApplyCounts(t *testing.T) {
	t.Parallel()
	scenarios := []struct {
		name     string
		workflow string
		before   []map[string]string // bundles applied first, in order (older to newer)
		hand     map[string]string   // unmanaged files put in the root
		next     map[string]string   // the bundle planned and applied
		older    bool                // next is older than what the root holds
		code     int
		want     counts
	}{
		{name: "fresh", workflow: "replacement", next: map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"},
			want: counts{Create: 2}},
		{name: "update", workflow: "additive", before: []map[string]string{{"a.txt": "1\n", "b.txt": "b\n"}},
			next: map[string]string{"a.txt": "2\n", "b.txt": "b\n", "c.txt": "c\n"}, want: counts{Create: 1, Update: 2}},
		{name: "redelivery", workflow: "additive", before: []map[string]string{{"a.txt": "1\n"}},
			next: nil, want: counts{Unchanged: 1}},
		{name: "collision", workflow: "replacement", before: []map[string]string{{"a.txt": "1\n"}},
			hand: map[string]string{"b.txt": "hand\n"}, next: map[string]string{"a.txt": "2\n", "b.txt": "b\n", "c.txt": "c\n"},
			code: exitRefused, want: counts{Collision: 1}},
		{name: "superseded", workflow: "replacement", before: []map[string]string{{"a.txt": "new\n"}},
			next: map[string]string{"a.txt": "old\n", "z.txt": "z\n"}, older: true, code: exitRefused, want: counts{}},
		{name: "replacement-deletes", workflow: "replacement", before: []map[string]string{{"a.txt": "1\n", "old/x.txt": "x\n", "old/y.txt": "y\n"}},
			next: map[string]string{"a.txt": "2\n"}, want: counts{Update: 1, Delete: 2}},
		{name: "file-becomes-folder", workflow: "additive", before: []map[string]string{{"docs": "file\n", "keep.txt": "k\n"}},
			next: map[string]string{"docs/index.txt": "i\n", "keep.txt": "k\n"}, want: counts{Create: 1, Update: 1, Delete: 1}},
		{name: "folder-becomes-file", workflow: "replacement", before: []map[string]string{{"docs/index.txt": "i\n", "keep.txt": "k\n"}},
			next: map[string]string{"docs": "file\n", "keep.txt": "k\n"}, want: counts{Create: 1, Update: 1, Delete: 1}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			e := newCLIEnv(t)
			root := e.root("site")
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: sc.workflow})
			var next testBundle
			if sc.older {
				next = e.bundle("next", "weatherreporter.today", sc.next)
			}
			for i, files := range sc.before {
				b := e.bundle("before"+string(rune('0'+i)), "weatherreporter.today", files)
				e.apply(pipeDaily, b)
				if sc.next == nil {
					next = b // delivered again
				}
			}
			if sc.next != nil && !sc.older {
				next = e.bundle("next", "weatherreporter.today", sc.next)
			}
			for p, c := range sc.hand {
				e.writeFile(filepath.Join(root, p), c)
			}

			planOut, _, planCode := e.run("plan", "--json", "--pipeline", pipeDaily, "--bundle", next.Dir)
			cp := filepath.Join(e.dir, "roots", "copy")
			if err := os.CopyFS(cp, os.DirFS(root)); err != nil {
				t.Fatal(err)
			}
			e.oneDest(pipeDaily, destSpec{ID: "latest", Root: cp, Workflow: sc.workflow})
			applyOut, _, applyCode := e.run("apply", "--json", "--pipeline", pipeDaily, "--bundle", next.Dir)

			var plan, apply []resultJSON
			if err := json.Unmarshal([]byte(planOut), &plan); err != nil || len(plan) != 1 {
				t.Fatalf("plan --json printed %q: %v", planOut, err)
			}
			if err := json.Unmarshal([]byte(applyOut), &apply); err != nil || len(apply) != 1 {
				t.Fatalf("apply --json printed %q: %v", applyOut, err)
			}
			if planCode != sc.code || applyCode != sc.code {
				t.Errorf("exit: plan %d, apply %d, want %d", planCode, applyCode, sc.code)
			}
			if plan[0].Counts != sc.want || apply[0].Counts != sc.want {
				t.Errorf("counts: plan %+v, apply %+v, want both %+v", plan[0].Counts, apply[0].Counts, sc.want)
			}
		})
	}
}
