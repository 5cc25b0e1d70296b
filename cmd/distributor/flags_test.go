package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/testenv"
)

// A malformed --digest is bad usage (exit 2), not a mismatch.
func TestMalformedDigestIsUsage(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestDurationFlagsTakeOneForm: every duration flag of every command reads
// durations as the configuration does ("7d", "1h30m", "1d12h"), and names
// itself when given a bad one. Before, --since took only Go durations
// while prune took "30d".
func TestDurationFlagsTakeOneForm(t *testing.T) {
	t.Parallel()
	forms := map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "90m": 90 * time.Minute,
		"1h30m": 90 * time.Minute, "1d12h": 36 * time.Hour,
	}
	var found []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			found = append(found, c.CommandPath()+" --"+f.Name)
			v, ok := f.Value.(*config.Duration)
			if !ok {
				t.Errorf("%s --%s is a %T, want a config.Duration", c.CommandPath(), f.Name, f.Value)
				return
			}
			for in, want := range forms {
				if err := f.Value.Set(in); err != nil || time.Duration(*v) != want {
					t.Errorf("%s --%s %s = %v, %v; want %v", c.CommandPath(), f.Name, in, time.Duration(*v), err, want)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newApp(io.Discard, io.Discard).rootCommand())
	slices.Sort(found)
	want := []string{"distributor apply --timeout", "distributor events tail --since", "distributor health --timeout", "distributor notify replay --timeout", "distributor prune --older-than", "distributor publish --timeout", "distributor replay --since", "distributor rollback --timeout", "distributor serve --connect-timeout"}
	if !slices.Equal(found, want) {
		t.Errorf("duration flags %q, want %q", found, want)
	}

	code, _, stderr := runCmd(t, "events", "tail", "--since", "7x")
	if want := `distributor: invalid argument "7x" for "--since" flag: invalid duration "7x": use a Go duration like "90m" or "720h", or whole days like "30d"` + "\n"; code != exitUsage || stderr != want {
		t.Errorf("--since 7x: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}

// TestSinceInDays: events tail and replay take --since 7d end to end.
func TestSinceInDays(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	for _, args := range [][]string{{"events", "tail", "--since", "7d"}, {"replay", "--since", "7d", "--dry-run"}} {
		if code, stdout, stderr := e.cmd(t, args...); code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
}

// TestMisspelledFlagSuggestsOne: an unknown flag within two edits of one
// the command takes (its own or inherited) names it; exit 2, one line.
func TestMisspelledFlagSuggestsOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--pipline", "p"}, "unknown flag: --pipline (did you mean --pipeline?)"},
		{[]string{"prune", "--older-then=30d"}, "unknown flag: --older-then (did you mean --older-than?)"},
		{[]string{"events", "tail", "--sinse", "1h"}, "unknown flag: --sinse (did you mean --since?)"},
		{[]string{"verify", "--confg", "x.yaml"}, "unknown flag: --confg (did you mean --config?)"},
		{[]string{"apply", "--force"}, "unknown flag: --force"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runCmd(t, tt.args...)
		if want := "distributor: " + tt.want + "\n"; code != exitUsage || stdout != "" || stderr != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, %q", tt.args, code, stdout, stderr, want)
		}
	}
}

// TestUnknownPipelineListsKnown: the error names the configured pipelines.
func TestUnknownPipelineListsKnown(t *testing.T) {
	t.Parallel()
	e, _ := newOfflineEnv(t)
	b := e.makeBundle(t, "b", "src.one", bundleOne)
	for _, cmd := range []string{"plan", "apply"} {
		code, _, stderr := e.cmd(t, cmd, "--pipeline", "nope", "--bundle", b)
		if want := `distributor: unknown pipeline "nope": known pipelines: p.one, p.two` + "\n"; code != exitUsage || stderr != want {
			t.Errorf("%s: exit %d, stderr %q; want 2, %q", cmd, code, stderr, want)
		}
	}
}

// TestNoAWSCredentialsNamesTheFix: with no credentials anywhere, apply to
// an S3 destination says which variables or profile to set, once, on
// stderr (no SDK log line besides it, no copy on stdout).
func TestNoAWSCredentialsNamesTheFix(t *testing.T) {
	s3 := testenv.NewS3(t)
	if s3.External {
		t.Skip("needs the in-process S3 server")
	}
	bucket := s3.Bucket(t)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	e := newCLIEnv(t)
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - id: p\n    destinations: [d]\ndestinations:\n"+
		"  - {id: d, backend: s3, bucket: "+bucket+", endpoint: \""+s3.URL+"\", region: us-east-1, timeouts: {attempts: 1}}\n")
	b := e.bundle("b", "src.one", map[string]string{"a.txt": "a\n"})
	out, errOut, code := e.run("apply", "--pipeline", "p", "--bundle", b.Dir)
	const fix = "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile in ~/.aws/credentials), or run with an IAM role: "
	if code != exitFailed || !strings.HasPrefix(errOut, "distributor: s3 write s3://"+bucket+"/.distributor/lock: "+fix) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line with %q", code, errOut, fix)
	}
	if strings.Contains(out, "credentials") {
		t.Errorf("stdout repeats the error: %q", out)
	}
}

// The hidden --cpuprofile writes a pprof profile of the run, for the
// benchmarks; --help does not show it.
func TestCPUProfileFlag(t *testing.T) {
	t.Parallel()
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

// TestHelpNamesEachDefaultOnce: no flag's help line states a default twice
// (its usage's own and pflag's "(default 0s)" of a zero duration).
func TestHelpNamesEachDefaultOnce(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Flags().FlagUsages(), "\n") {
			if strings.Count(line, "default") > 1 {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newApp(io.Discard, io.Discard).rootCommand())
}
