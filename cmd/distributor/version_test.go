package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestResolveVersion(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "5fbad15838f7b89d10b034ef572f14fea15f5a00"
	tests := []struct {
		name, ldflags string
		info          *debug.BuildInfo
		ver, rev      string
	}{
		{"release stamp wins", "v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202233453-5fbad15838f7"}, Settings: vcs(rev, "false")}, "v1.4.0", rev},
		{"go install of a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.3.2"}}, "v1.3.2", ""},
		{"go build in a clone", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202233453-5fbad15838f7+dirty"}, Settings: vcs(rev, "true")}, "v0.0.0-20261202233453-5fbad15838f7+dirty", rev},
		{"revision without a module version", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "devel+5fbad15838f7.dirty", rev},
		{"the old default is no stamp", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "devel+5fbad15838f7", rev},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", ""},
		{"no build info", "", nil, "dev", ""},
	}
	for _, tt := range tests {
		ver, r := resolveVersion(tt.ldflags, tt.info)
		if ver != tt.ver || r != tt.rev {
			t.Errorf("%s: resolveVersion = %q, %q; want %q, %q", tt.name, ver, r, tt.ver, tt.rev)
		}
	}
}

// TestVersionCommandAndFlag: both print the same one line.
func TestVersionCommandAndFlag(t *testing.T) {
	t.Parallel()
	want := "distributor " + version
	if revision != "" {
		want += " revision " + revision
	}
	want += " " + runtime.Version() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, stdout, stderr := runCmd(t, args...); code != 0 || stdout != want || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", args, code, stdout, stderr, want)
		}
	}
}

// releaseStamp is the version TestBuiltBinary stamps into the binary.
const releaseStamp = "v9.8.7-test"

// TestBuiltBinary builds the binary once, with a release stamp, for the
// tests that run it as a process.
func TestBuiltBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "distributor")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+releaseStamp, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build took %s", time.Since(start).Round(time.Millisecond))
	t.Run("StampsCatalogs", func(t *testing.T) { t.Parallel(); builtBinaryStampsCatalogs(t, bin) })
	t.Run("TwoServeProcessesShareWork", func(t *testing.T) { t.Parallel(); twoServeProcessesShareWork(t, bin) })
	t.Run("NotifyThroughServeProcesses", func(t *testing.T) { t.Parallel(); notifyThroughServeProcesses(t, bin) })
}

// builtBinaryStampsCatalogs: a binary built with the release stamp
// reports it and records it in the catalogs it writes.
func builtBinaryStampsCatalogs(t *testing.T, bin string) {
	const stamp = releaseStamp
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "distributor "+stamp+" ") {
		t.Fatalf("version: %q, %v; want distributor %s …", out, err, stamp)
	}
	e, _ := newOfflineEnv(t)
	b := e.makeBundle(t, "b", "src.one", bundleOne)
	if out, err := exec.Command(bin, "apply", "--config", e.cfg, "--pipeline", "p.two", "--bundle", b).CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(e.roots["d3"], ".distributor.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version string `json:"distributor_version"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || doc.Version != stamp {
		t.Errorf("catalog distributor_version = %q, %v; want %q", doc.Version, err, stamp)
	}
}
