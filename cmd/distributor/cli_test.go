package main

// Helpers for the end-to-end tests of the direct-mode CLI. Every test drives
// distributor only through run(ctx, args, stdout, stderr), in process, on
// folders under t.TempDir(), and inspects what landed on disk.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
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

// runCLI runs distributor with args and returns what it printed and its
// exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// bundleCreated is the fixed --created time of every test bundle, so that
// manifests (and their digests) depend only on the files and the id.
var bundleCreated = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)

// cliEnv is one test's world: a temp folder with a config, bundles and roots.
type cliEnv struct {
	t       *testing.T
	dir     string
	cfg     string
	bundles int              // made so far (see bundle)
	now     func() time.Time // the clock of the runs (nil: the real one); see at
	// leaseWait is how long the runs wait for a held root (0: apply's 10 s).
	leaseWait time.Duration
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	dir := t.TempDir()
	return &cliEnv{t: t, dir: dir, cfg: filepath.Join(dir, "distributor.yaml")}
}

// root creates and returns the absolute folder dir/roots/name.
func (e *cliEnv) root(name string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, "roots", name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

type destSpec struct {
	ID, Root, Workflow string
	Prefix             string // layout.prefix; "" = outputs keep their bundle paths
	HTML               bool   // publish html with the markdown transform (index: report.md)
	BaseURL            string // links.base_url (pretty)
	MaxDeletes         int
	Exclude            []string
}

type pipeSpec struct {
	ID    string
	Dests []string
}

// writeConfig writes the YAML configuration. nats.listen points at a port
// nothing listens on, so that no command finds a NATS server by accident.
func (e *cliEnv) writeConfig(pipes []pipeSpec, dests []destSpec) {
	e.t.Helper()
	var b strings.Builder
	b.WriteString("nats:\n  listen: 127.0.0.1:1\npipelines:\n")
	for _, p := range pipes {
		fmt.Fprintf(&b, "  - id: %s\n    destinations: [%s]\n", p.ID, strings.Join(p.Dests, ", "))
		if len(pipes) > 1 {
			// As recommended beside other pipelines (config validate warns
			// otherwise); one pipeline alone keeps accepting any location.
			fmt.Fprintf(&b, "    bundle_locations: [%q]\n", filepath.Join(e.dir, "bundles"))
		}
	}
	b.WriteString("destinations:\n")
	for _, d := range dests {
		fmt.Fprintf(&b, "  - id: %s\n    backend: local\n    path: %q\n", d.ID, d.Root)
		if d.Workflow != "" {
			fmt.Fprintf(&b, "    workflow: %s\n", d.Workflow)
		}
		if d.Prefix != "" {
			fmt.Fprintf(&b, "    layout: {prefix: %q}\n", d.Prefix)
		}
		excl := "[]"
		if len(d.Exclude) > 0 {
			q, _ := json.Marshal(d.Exclude)
			excl = string(q)
		}
		fmt.Fprintf(&b, "    publish: {sources: true, html: %t, exclude: %s}\n", d.HTML, excl)
		if d.HTML {
			b.WriteString("    transforms:\n      - {name: markdown_to_html, match: \"**/*.md\", index: report.md}\n")
		}
		if d.BaseURL != "" {
			fmt.Fprintf(&b, "    links: {base_url: %q, pretty: true}\n", d.BaseURL)
		}
		if d.MaxDeletes > 0 {
			fmt.Fprintf(&b, "    max_deletes: %d\n", d.MaxDeletes)
		}
	}
	e.writeFile(e.cfg, b.String())
}

// oneDest configures pipeline p publishing to one destination.
func (e *cliEnv) oneDest(p string, d destSpec) {
	e.writeConfig([]pipeSpec{{p, []string{d.ID}}}, []destSpec{d})
}

func (e *cliEnv) writeFile(name, content string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// testBundle is a bundle folder made with `bundle create`.
type testBundle struct {
	Dir     string
	ID      string
	Digest  string
	Files   map[string]string
	Created time.Time
}

func (b testBundle) source() catalog.Source {
	return catalog.Source{ID: b.ID, Digest: b.Digest, Created: b.Created}
}

// bundle writes files into dir/bundles/name and runs `bundle create` on it.
func (e *cliEnv) bundle(name, id string, files map[string]string) testBundle {
	e.t.Helper()
	// Each bundle a second newer than the one made before it: a later
	// bundle of the same source is its newer version.
	created := bundleCreated.Add(time.Duration(e.bundles) * time.Second)
	e.bundles++
	return e.bundleAt(name, id, created, files)
}

// bundleAt is bundle with the manifest created at created.
func (e *cliEnv) bundleAt(name, id string, created time.Time, files map[string]string) testBundle {
	e.t.Helper()
	dir := filepath.Join(e.dir, "bundles", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for p, c := range files {
		e.writeFile(filepath.Join(dir, filepath.FromSlash(p)), c)
	}
	out, errOut, code := runCLI(e.t, "bundle", "create", dir, "--id", id, "--created", created.Format(time.RFC3339))
	if code != 0 {
		e.t.Fatalf("bundle create %s: exit %d: %s", dir, code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	b := testBundle{Dir: dir, ID: id, Digest: sha(string(data)), Files: files, Created: created}
	if want := fmt.Sprintf("wrote %s/manifest.json: %d files, id %s, digest %s\n", dir, len(files), id, b.Digest); out != want {
		e.t.Fatalf("bundle create printed %q, want %q", out, want)
	}
	return b
}

// run runs distributor with --config, on the env's clock.
func (e *cliEnv) run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	a := newApp(&out, &errb)
	a.now, a.leaseWait = e.now, e.leaseWait
	code = a.run(context.Background(), append([]string{"--config", e.cfg}, args...))
	return out.String(), errb.String(), code
}

// at sets the clock of the runs that follow to t and returns the clock
// whose holds(x) is x == t: no waiting for the next whole second between
// runs whose catalog times must differ.
func (e *cliEnv) at(t time.Time) clock {
	e.now = func() time.Time { return t }
	return clock{from: t, to: t}
}

// apply publishes b for pipeline p and fails the test unless it succeeds.
func (e *cliEnv) apply(p string, b testBundle, extra ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(append([]string{"apply", "--pipeline", p, "--bundle", b.Dir}, extra...)...)
	if code != 0 {
		e.t.Fatalf("apply %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", p, b.Dir, code, out, errOut)
	}
	return out
}

// applyJSON is apply --json, decoded.
func (e *cliEnv) applyJSON(p string, b testBundle, extra ...string) []resultJSON {
	e.t.Helper()
	out := e.apply(p, b, append([]string{"--json"}, extra...)...)
	var res []resultJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		e.t.Fatalf("apply --json printed %q: %v", out, err)
	}
	return res
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return catalog.Digest(sum[:])
}

// catalogOf parses root's .distributor.json strictly (it must be a valid v4
// catalog) and checks that its bytes are exactly what Marshal writes.
func (e *cliEnv) catalogOf(root string) *catalog.Catalog {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(root, catalog.FileName))
	if err != nil {
		e.t.Fatal(err)
	}
	cat, legacy, err := catalog.Parse(data)
	if err != nil || legacy {
		e.t.Fatalf("%s/%s: legacy %v, %v", root, catalog.FileName, legacy, err)
	}
	again, err := catalog.Marshal(cat)
	if err != nil {
		e.t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		e.t.Fatalf("%s/%s is not in the deterministic form:\n%s\nwant:\n%s", root, catalog.FileName, data, again)
	}
	return cat
}

// files returns every regular file under root with its content, except the
// reserved folder .distributor/ (the catalog file itself is included).
func (e *cliEnv) files(root string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for p, f := range e.snapshot(root) {
		if !f.dir && !catalog.IsReserved(p) || p == catalog.FileName {
			out[p] = f.data
		}
	}
	return out
}

// entry is one file or folder of a snapshot.
type entry struct {
	dir   bool
	data  string
	mtime time.Time
	ino   uint64
}

// snapshot records every file (bytes, mtime, inode) and folder under root.
// Left out: the compare-and-swap lock file and the temp folder, which the
// local backend creates on demand and keeps. A refused or failed run must
// leave everything else, including .distributor/ (no lock object, no
// intent), exactly as it was.
func (e *cliEnv) snapshot(root string) map[string]entry {
	e.t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, name)
		rel = filepath.ToSlash(rel)
		switch rel {
		case ".", ".distributor", ".distributor/cas.lock":
			return nil
		case ".distributor/tmp":
			return filepath.SkipDir
		}
		fi, err := os.Lstat(name)
		if err != nil {
			return err
		}
		en := entry{dir: d.IsDir(), mtime: fi.ModTime(), ino: testenv.FileID(e.t, name)}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(name)
			en.data = "symlink -> " + target
		} else if !d.IsDir() {
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			en.data = string(data)
		}
		out[rel] = en
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// sameSnapshot fails the test with every difference between two snapshots.
func (e *cliEnv) sameSnapshot(what string, before, after map[string]entry) {
	e.t.Helper()
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: removed", p))
		case a.data != b.data:
			diffs = append(diffs, fmt.Sprintf("%s: content %q -> %q", p, b.data, a.data))
		case !b.dir && (!a.mtime.Equal(b.mtime) || a.ino != b.ino):
			diffs = append(diffs, fmt.Sprintf("%s: rewritten (mtime %s -> %s, inode %d -> %d)", p, b.mtime, a.mtime, b.ino, a.ino))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: added (%q)", p, a.data))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		e.t.Errorf("%s changed the root:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

// wantFiles compares the files under root (see files) with want exactly,
// ignoring the catalog's content (checked on its own).
func (e *cliEnv) wantFiles(root string, want map[string]string) {
	e.t.Helper()
	got := e.files(root)
	if _, ok := want[catalog.FileName]; ok {
		want[catalog.FileName] = got[catalog.FileName]
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Errorf("files in %s:\n got %s\nwant %s", root, keysAndData(got), keysAndData(want))
	}
}

func keysAndData(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		v := m[k]
		if k == catalog.FileName {
			v = "…"
		}
		keys = append(keys, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

// srcRecord is the record of a copied source output, times left zero.
func srcRecord(path, pipeline, dest string, b testBundle, content string) catalog.Output {
	return catalog.Output{Path: path, PipelineID: pipeline, DestinationID: dest, Source: b.source(),
		Kind: catalog.KindSource, SHA256: sha(content), Size: int64(len(content))}
}

// untimed returns the records with CreatedAt and UpdatedAt zeroed, for
// comparing everything but the times.
func untimed(outs []catalog.Output) []catalog.Output {
	cp := make([]catalog.Output, len(outs))
	for i, o := range outs {
		o.CreatedAt, o.UpdatedAt = time.Time{}, time.Time{}
		cp[i] = o
	}
	return cp
}

// wantRecords compares the catalog's records with want, times excluded.
func (e *cliEnv) wantRecords(cat *catalog.Catalog, want ...catalog.Output) {
	e.t.Helper()
	sort.Slice(want, func(i, j int) bool { return want[i].Path < want[j].Path })
	if got := untimed(cat.Outputs); !reflect.DeepEqual(got, want) {
		e.t.Errorf("catalog records:\n got %s\nwant %s", recordsString(got), recordsString(want))
	}
}

func recordsString(outs []catalog.Output) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "\n  %+v", o)
	}
	return b.String()
}

// clock brackets a run: times the run writes lie in [from, to].
type clock struct{ from, to time.Time }

func startClock() clock { return clock{from: time.Now().UTC().Truncate(time.Second)} }

func (c clock) stop() clock { c.to = time.Now().UTC(); return c }

func (c clock) holds(t time.Time) bool { return !t.Before(c.from) && !t.After(c.to) }

// wantTimesIn checks that the catalog and the records at paths were written
// during c, with created_at == updated_at (first written in that run).
func (e *cliEnv) wantCreatedIn(c clock, cat *catalog.Catalog, paths ...string) {
	e.t.Helper()
	idx := cat.Index()
	for _, p := range paths {
		o, ok := idx[p]
		if !ok {
			e.t.Errorf("no record for %s", p)
			continue
		}
		if !c.holds(o.CreatedAt) || !o.UpdatedAt.Equal(o.CreatedAt) {
			e.t.Errorf("%s: created_at %s, updated_at %s; want both the run's time in [%s, %s]", p, o.CreatedAt, o.UpdatedAt, c.from, c.to)
		}
	}
}

// fillLine expands a message template that uses indexed verbs (%[1]s…);
// a template without any is returned as is.
func fillLine(tmpl string, args ...any) string {
	if !strings.Contains(tmpl, "%[") {
		return tmpl
	}
	return fmt.Sprintf(tmpl, args...)
}

// stderrLine checks that stderr is exactly one line, want.
func stderrLine(t *testing.T, stderr, want string) {
	t.Helper()
	if stderr != want+"\n" {
		t.Errorf("stderr:\n got %q\nwant %q", stderr, want+"\n")
	}
}

// lastErrorLine checks that stderr holds exactly one "distributor:" error
// line, as its last line, equal to want. Log lines (recovery notes) may
// precede it.
func lastErrorLine(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "distributor: ") {
			n++
		}
	}
	if n != 1 || lines[len(lines)-1] != want || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr should end with the one error line %q, got:\n%s", want, stderr)
	}
}

// fileStamp is a file's mtime and inode: a rewrite (temp + rename) changes
// the inode, so an unchanged stamp means the file was not written.
type fileStamp struct {
	mtime time.Time
	ino   uint64
}

func stampOf(t *testing.T, name string) fileStamp {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fileStamp{fi.ModTime(), testenv.FileID(t, name)}
}
