package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/testenv/schematest"
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
	out, errOut, code = e.run("plan", "--pipeline", pipeDaily, "--bundle", b.Dir, "--json")
	var plans []resultJSON
	decodeJSON(t, "plan --json", out, &plans)
	wantGroups := []groupJSON{{"", 1}, {"**/*.css", 2}, {"index.html", 1}}
	if code != 0 || len(plans) != 1 || !slices.Equal(plans[0].Groups, wantGroups) {
		t.Fatalf("plan --json: exit %d, %s, groups %+v, want %+v", code, errOut, plans, wantGroups)
	}
}

// status shows the paths a root keeps for readers of the previous version
// (retain_previous) and when they go, in its line and in --json (against
// docs/schema/cli-status.json); verify finds nothing wrong with them.
func TestStatusShowsRetiredPaths(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.writeFile(e.cfg, fmt.Sprintf("nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: %s\n    destinations: [latest]\n"+
		"destinations:\n  - id: latest\n    backend: local\n    path: %q\n    workflow: replacement\n    retain_previous: 1h\n", pipeDaily, root))
	e.apply(pipeDaily, e.bundle("b1", "weatherreporter.today", map[string]string{"index.html": "1\n", "app.1.js": "1\n"}))
	e.apply(pipeDaily, e.bundle("b2", "weatherreporter.today", map[string]string{"index.html": "2\n", "app.2.js": "2\n"}))
	if got, err := os.ReadFile(filepath.Join(root, "app.1.js")); string(got) != "1\n" {
		t.Fatalf("retired app.1.js holds %q (%v)", got, err)
	}
	out, errOut, code := e.run("status", "--destination", "latest")
	if code != 0 || !regexp.MustCompile(`\n  retired: 1, removed after \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n`).MatchString(out) {
		t.Fatalf("status: exit %d, stdout:\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.run("status", "--json")
	if err := schematest.New(t).Validate(t, "cli-status.json", []byte(out)); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	var st statusJSON
	decodeJSON(t, "status --json", out, &st)
	if r := st.Destinations[0].Retired; r == nil || r.Paths != 1 || r.RemovedAfter.IsZero() {
		t.Fatalf("status --json retired: %+v", r)
	}
	if out, errOut, code = e.run("verify", "--destination", "latest"); code != 0 {
		t.Fatalf("verify with a retired path: exit %d\n%s%s", code, out, errOut)
	}
}

// The status page shows the retired paths of a destination that has them.
func TestStatusPageShowsRetiredPaths(t *testing.T) {
	t.Parallel()
	a := &app{}
	page := a.newStatusPage(&config.Config{}, &readiness{})
	due := time.Date(2026, 6, 19, 12, 15, 0, 0, time.UTC)
	page.read = func(context.Context) statusPageData {
		return statusPageData{Status: statusJSON{Destinations: []destStatusJSON{{DestinationID: "www", Retired: &retiredJSON{Paths: 3, RemovedAfter: due}}}}}
	}
	rec := httptest.NewRecorder()
	page.serveHTML(rec, httptest.NewRequest("GET", "/", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "<dt>retired</dt><dd>retired: 3, removed after 2026-06-19T12:15:00Z</dd>") {
		t.Fatalf("status page: %d\n%s", rec.Code, body)
	}
}
