package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A malformed --digest is bad usage (exit 2), not a mismatch.
func TestMalformedDigestIsUsage(t *testing.T) {
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	for _, cmd := range []string{"plan", "apply"} {
		_, errOut, code := e.run(cmd, "--pipeline", pipeDaily, "--bundle", b.Dir, "--digest", "abc")
		want := `distributor: --digest "abc": give the manifest digest as sha256:<64 lowercase hex> (bundle create prints it)` + "\n"
		if code != exitUsage || errOut != want {
			t.Errorf("%s: exit %d, stderr %q; want 2, %q", cmd, code, errOut, want)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("root changed: %v", ents)
	}
}

// A relative --bundle is resolved against the working directory.
func TestRelativeBundleLocationIsResolved(t *testing.T) {
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", rel); code != exitOK {
		t.Fatalf("apply --bundle %s: exit %d, %s", rel, code, errOut)
	}
	if data, err := os.ReadFile(filepath.Join(root, "a.txt")); err != nil || string(data) != "a\n" {
		t.Fatalf("a.txt = %q, %v", data, err)
	}
}

// The hidden --cpuprofile writes a pprof profile of the run, for the
// benchmarks; --help does not show it.
func TestCPUProfileFlag(t *testing.T) {
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	prof := filepath.Join(e.dir, "cpu.prof")
	if _, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir, "--cpuprofile", prof); code != exitOK {
		t.Fatalf("apply --cpuprofile: exit %d, %s", code, errOut)
	}
	data, err := os.ReadFile(prof)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b { // pprof files are gzipped
		t.Fatalf("profile = %d bytes, %v; want a gzipped pprof file", len(data), err)
	}
	if out, _, _ := e.run("--help"); strings.Contains(out, "cpuprofile") {
		t.Errorf("--help shows the hidden --cpuprofile:\n%s", out)
	}
}
