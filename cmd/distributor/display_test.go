package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/distributor/distributor/service"
)

// runTTY runs the CLI as if stdout and stderr were terminals.
func runTTY(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(&out, &errb)
	a.terminal = func(io.Writer) bool { return true }
	code = a.run(context.Background(), args)
	return out.String(), errb.String(), code
}

// On a terminal a big apply lists the first maxListed changes and a
// summary line; --verbose lists every change; a pipe always gets them all.
func TestTerminalApplyListsAtMostMaxListed(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	files := map[string]string{}
	for i := range maxListed + 10 {
		files[fmt.Sprintf("f%02d.txt", i)] = fmt.Sprintf("%d\n", i)
	}
	b := e.bundle("b", "weatherreporter.today", files)

	out, _, code := runTTY(t, "--config", e.cfg, "--quiet", "plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
	var want strings.Builder
	fmt.Fprintf(&want, "latest (%s, additive)\n", root)
	for i := range maxListed {
		fmt.Fprintf(&want, "  + f%02d.txt\n", i)
	}
	want.WriteString("  … and 10 more (--verbose lists every change, --json prints them all)\n")
	want.WriteString("  would create 30, update 0, delete 0; 0 unchanged, 0 collision\n")
	if code != 0 || out != want.String() {
		t.Errorf("plan on a terminal: exit %d, stdout:\n%s\nwant:\n%s", code, out, want.String())
	}

	out, _, code = runTTY(t, "--config", e.cfg, "--quiet", "--verbose", "plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
	if n := strings.Count(out, "\n  + "); code != 0 || n != maxListed+10 || strings.Contains(out, "more") {
		t.Errorf("plan --verbose on a terminal listed %d changes, want %d:\n%s", n, maxListed+10, out)
	}
	out, _, _ = e.run("plan", "--pipeline", pipeDaily, "--bundle", b.Dir)
	if n := strings.Count(out, "\n  + "); n != maxListed+10 {
		t.Errorf("plan into a pipe listed %d changes, want %d", n, maxListed+10)
	}
}

// The progress bar is drawn on stderr when both streams are terminals, and
// never with --quiet or into a pipe.
func TestProgressOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "bb\n"})

	_, errOut, code := runTTY(t, "--config", e.cfg, "verify", "--destination", "latest")
	if code != 0 || errOut != "" {
		t.Errorf("verify of an empty root: exit %d, stderr %q (nothing to verify: no bar)", code, errOut)
	}
	_, errOut, code = runTTY(t, "--config", e.cfg, "apply", "--pipeline", pipeDaily, "--bundle", b.Dir)
	if code != 0 || !strings.Contains(errOut, "latest: writing ") {
		t.Errorf("apply on a terminal: exit %d, stderr %q, want a progress bar", code, errOut)
	}
	_, errOut, code = runTTY(t, "--config", e.cfg, "verify", "--destination", "latest")
	if code != 0 || !strings.Contains(errOut, "latest: verifying ") {
		t.Errorf("verify on a terminal: exit %d, stderr %q, want a progress bar", code, errOut)
	}
	_, errOut, code = runTTY(t, "--config", e.cfg, "--quiet", "verify", "--destination", "latest")
	if code != 0 || errOut != "" {
		t.Errorf("verify --quiet: exit %d, stderr %q, want nothing", code, errOut)
	}
	dir := filepath.Join(e.dir, "tty-bundle")
	e.writeFile(filepath.Join(dir, "x.txt"), "x\n")
	_, errOut, code = runTTY(t, "bundle", "create", dir, "--id", "weatherreporter.x")
	if code != 0 || !strings.Contains(errOut, "bundle: hashing ") {
		t.Errorf("bundle create on a terminal: exit %d, stderr %q, want a progress bar", code, errOut)
	}
	_, errOut, code = e.run("verify", "--destination", "latest")
	if code != 0 || errOut != "" {
		t.Errorf("verify into a pipe: exit %d, stderr %q, want nothing", code, errOut)
	}
}

// A local root written relative to the configuration file is shown as
// written in human output and error lines; --json keeps the absolute root
// and adds root_as_written.
func TestRootsShownAsWritten(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	abs := filepath.Join(e.dir, "site", "latest")
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: "+pipeDaily+"\n    destinations: [latest]\n"+
		"destinations:\n  - id: latest\n    backend: local\n    path: site/latest\n    workflow: additive\n    publish: {sources: true}\n")
	e.writeFile(filepath.Join(abs, "b.txt"), "hand\n")
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"})

	out := e.apply(pipeDaily, b)
	if want := "latest (site/latest, additive)\n  + a.txt\n  1 create, 0 update, 0 unchanged, 0 delete, 0 collision\n"; out != want {
		t.Errorf("apply stdout:\n%s\nwant:\n%s", out, want)
	}
	res := e.applyJSON(pipeDaily, b)
	if len(res) != 1 || res[0].Root != abs || res[0].RootAsWritten != "site/latest" {
		t.Errorf("apply --json root %q as written %q, want %q and site/latest", res[0].Root, res[0].RootAsWritten, abs)
	}
	vout, verr, vcode := e.run("verify", "--destination", "latest", "--json")
	var rep verifyJSON
	if err := json.Unmarshal([]byte(vout), &rep); vcode != exitOK || err != nil {
		t.Fatalf("verify --json: exit %d, %v\n%s%s", vcode, err, vout, verr)
	}
	if want := (verifyJSON{DestinationID: "latest", Root: abs, RootAsWritten: "site/latest", Checked: 1, Missing: []string{}, Damaged: []string{}, InFlight: []string{}, Symlinks: []string{},
		Leftovers: service.LeftoverReport{Paths: []string{}}}); !reflect.DeepEqual(rep, want) {
		t.Errorf("verify --json = %+v, want %+v", rep, want)
	}
	// An unknown --pipeline is a usage error naming the known ones, not
	// "0 checked".
	if vout, verr, vcode := e.run("verify", "--destination", "latest", "--pipeline", "nope"); vcode != exitUsage || vout != "" {
		t.Errorf("verify --pipeline nope: exit %d, stdout %q, want %d and nothing", vcode, vout, exitUsage)
	} else {
		stderrLine(t, verr, `distributor: --pipeline "nope": unknown pipeline; known pipelines: `+pipeDaily)
	}
	b2 := e.bundle("b2", "weatherreporter.today", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	_, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b2.Dir)
	stderrLine(t, errOut, `distributor: collision with unmanaged content in site/latest: 1 planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): ["b.txt"]`)
	if code != exitRefused {
		t.Errorf("exit %d, want %d", code, exitRefused)
	}
}

// An error line shows a configured root as written, except inside a root
// key (file:///…/), which stays a whole URL.
func TestShowRootsInKeepsRootKeysWhole(t *testing.T) {
	a := &app{written: map[string]string{"/tmp/x/site/latest": "site/latest"}}
	got := a.showRootsIn("lease held: file:///tmp/x/site/latest/ is held; write /tmp/x/site/latest/a.txt")
	want := "lease held: file:///tmp/x/site/latest/ is held; write site/latest/a.txt"
	if got != want {
		t.Fatalf("showRootsIn = %q, want %q", got, want)
	}
}
