package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// apply --json's error is the line stderr prints (roots as written, the
// fix named), and the human summary of a collision says so rather than
// "failed".
func TestApplyJSONErrorIsTheStderrLine(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: "+pipeDaily+"\n    destinations: [latest]\n"+
		"destinations:\n  - id: latest\n    backend: local\n    path: site/latest\n    workflow: additive\n")
	e.writeFile(filepath.Join(e.dir, "site", "latest", "b.txt"), "hand\n")
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})

	out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir, "--json")
	var res []resultJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitRefused || len(res) != 1 {
		t.Fatalf("apply --json: exit %d, %v\n%s", code, err, out)
	}
	if "distributor: "+res[0].Error+"\n" != errOut || !strings.Contains(errOut, " in site/latest: ") {
		t.Errorf("apply --json error %q, stderr %q: want the same line, the root as written", res[0].Error, errOut)
	}
	out, _, _ = e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir)
	if !strings.HasSuffix(out, "  0 create, 0 update, 0 unchanged, 0 delete, 1 collision\n  collision: nothing written\n") || strings.Contains(out, "failed") {
		t.Errorf("apply of a collision:\n%s\nwant the summary to say collision, not failed", out)
	}
}

// verify --json always names the pipeline it checked: null for all of
// them.
func TestVerifyJSONNamesThePipeline(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root})
	e.apply(pipeDaily, e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"}))
	for _, tc := range []struct {
		args []string
		want any
	}{
		{nil, nil},
		{[]string{"--pipeline", pipeDaily}, pipeDaily},
	} {
		out, errOut, code := e.run(append([]string{"verify", "--destination", "latest", "--json"}, tc.args...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
			t.Fatalf("verify --json %v: exit %d, %v\n%s%s", tc.args, code, err, out, errOut)
		}
		if got, ok := rep["pipeline_id"]; !ok || got != tc.want {
			t.Errorf("verify --json %v: pipeline_id %v (present %v), want %v", tc.args, got, ok, tc.want)
		}
	}
}

// prune --json prints --older-than as the configuration writes durations.
func TestPruneJSONOlderThanInDays(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root})
	e.apply(pipeDaily, e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"}))
	out, errOut, code := e.run("prune", "--pipeline", pipeDaily, "--destination", "latest", "--older-than", "1d12h", "--dry-run", "--json")
	var rep pruneJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || rep.OlderThan != "1d12h" {
		t.Errorf("prune --json --older-than 1d12h: exit %d, %v, older_than %q; want \"1d12h\"\n%s%s", code, err, rep.OlderThan, out, errOut)
	}
}
