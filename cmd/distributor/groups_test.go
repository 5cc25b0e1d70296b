package main

import (
	"fmt"
	"testing"
)

// plan shows how the writes fall into the destination's publish_last
// groups, in the order apply makes them visible, the deletes last.
func TestPlanShowsPublishLastGroups(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.writeFile(e.cfg, fmt.Sprintf("nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: %s\n    destinations: [latest]\n"+
		"destinations:\n  - id: latest\n    backend: local\n    path: %q\n    workflow: replacement\n"+
		"    publish_last: [\"**/*.css\", \"index.html\"]\n", pipeDaily, root))
	b := e.bundle("b", "weatherreporter.today", map[string]string{"index.html": "i\n", "a.css": "a\n", "s/b.css": "b\n", "x.js": "x\n"})
	out, errOut, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
	want := fmt.Sprintf("latest (%s, replacement)\n  + a.css\n  + index.html\n  + s/b.css\n  + x.js\n"+
		"  would create 4, update 0, delete 0; 0 unchanged, 0 collision\n"+
		"  visible in order: 1 matching no group, then 2 matching \"**/*.css\", then 1 matching \"index.html\", then the deletes\n", root)
	if code != 0 || errOut != "" || out != want {
		t.Fatalf("plan: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}
