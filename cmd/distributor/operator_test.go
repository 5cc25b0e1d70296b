package main

// Tests of the operator's commands (status, history, rollback) and of
// replay --allow-older, against a real embedded NATS and serve, on a local
// folder and on the in-process S3 server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// opEnv is one configuration over two destinations on one backend, with
// bundles in local folders:
//
//	p.one → rep (replacement), add (additive)
//	p.two → rep
type opEnv struct {
	t       *testing.T
	dir     string
	backend string // "local" or "s3"
	s3      *testenv.S3
	bucket  string
	nats    *testenv.NATS
	cfg     string // with nats.url when nats is set
	offline string // the same destinations without NATS
	schemas *schematest.Set
}

// newOpEnv writes both configurations; on S3 it points the standard AWS
// credential chain at the in-process server (so the test is not parallel).
func newOpEnv(t *testing.T, backend string) *opEnv {
	t.Helper()
	e := &opEnv{t: t, dir: t.TempDir(), backend: backend, nats: testenv.NewNATS(t), schemas: schematest.New(t)}
	var s3block string
	if backend == "s3" {
		e.s3 = testenv.NewS3(t)
		e.s3.UseStandardChain(t)
		e.bucket = e.s3.Bucket(t)
		s3block = fmt.Sprintf("s3: {endpoint: %q, path_style: true, region: us-east-1}\n", e.s3.URL)
	}
	rest := s3block + "pipelines:\n  - id: p.one\n    destinations: [rep, add]\n  - id: p.two\n    destinations: [rep]\ndestinations:\n"
	for _, d := range []struct{ id, workflow string }{{"rep", "replacement"}, {"add", "additive"}} {
		if backend == "s3" {
			rest += fmt.Sprintf("  - {id: %s, backend: s3, bucket: %s, path: %s/, workflow: %s}\n", d.id, e.bucket, d.id, d.workflow)
			continue
		}
		root := filepath.Join(e.dir, "roots", d.id)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		rest += fmt.Sprintf("  - {id: %s, backend: local, path: %q, workflow: %s}\n", d.id, root, d.workflow)
	}
	e.cfg = filepath.Join(e.dir, "distributor.yaml")
	e.offline = filepath.Join(e.dir, "offline.yaml")
	writeTestFile(t, e.cfg, "nats:\n  url: "+e.nats.URL+"\n"+rest)
	writeTestFile(t, e.offline, "nats:\n  listen: "+testenv.FreeAddr(t)+"\n  store_dir: "+filepath.Join(e.dir, "nats")+"\n"+rest)
	return e
}

func writeTestFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bundle writes files into a new folder and runs `bundle create --created`.
func (e *opEnv) bundle(name, id string, created time.Time, files map[string]string) testBundle {
	e.t.Helper()
	dir := filepath.Join(e.dir, "bundles", name)
	testenv.WriteFiles(e.t, dir, files)
	if code, _, stderr := runCmd(e.t, "bundle", "create", dir, "--id", id, "--created", created.Format(time.RFC3339)); code != 0 {
		e.t.Fatalf("bundle create %s: exit %d: %s", dir, code, stderr)
	}
	return testBundle{Dir: dir, ID: id, Digest: digestOfFile(e.t, filepath.Join(dir, "manifest.json")), Files: files, Created: created}
}

// cmd runs a command with the NATS configuration; direct with the other.
func (e *opEnv) cmd(args ...string) (int, string, string) {
	e.t.Helper()
	return runCmd(e.t, append(args, "--config", e.cfg)...)
}

func (e *opEnv) direct(args ...string) (int, string, string) {
	e.t.Helper()
	return runCmd(e.t, append(args, "--config", e.offline)...)
}

// must runs cmd and fails the test unless it exits want.
func (e *opEnv) must(want int, run func(...string) (int, string, string), args ...string) string {
	e.t.Helper()
	code, stdout, stderr := run(args...)
	if code != want {
		e.t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
	}
	return stdout
}

// publish announces b for pipeline p (to dests, or all of its
// destinations) and waits for the results.
func (e *opEnv) publish(want int, p string, b testBundle, dests ...string) string {
	e.t.Helper()
	args := []string{"publish", "--wait", "--pipeline", p, "--bundle", b.Dir}
	for _, d := range dests {
		args = append(args, "--destination", d)
	}
	return announcedID(e.t, e.must(want, e.cmd, args...))
}

// root opens a destination's root the production way.
func (e *opEnv) root(dest string) storage.Backend {
	e.t.Helper()
	cfg, err := config.Load(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	d, _ := cfg.Destination(dest)
	b, err := stores.New(cfg).Destination(context.Background(), d)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// files returns the outputs in a destination's root (distributor's own
// files left out).
func (e *opEnv) files(dest string) map[string]string {
	e.t.Helper()
	ctx := context.Background()
	root := e.root(dest)
	out := map[string]string{}
	err := root.List(ctx, "", func(o storage.ObjectInfo) error {
		if catalog.IsReserved(o.Path) {
			return nil
		}
		r, err := root.Open(ctx, o.Path)
		if err != nil {
			return err
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		out[o.Path] = string(data)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// catalogBytes is a destination's .distributor.json.
func (e *opEnv) catalogBytes(dest string) []byte {
	e.t.Helper()
	data, _, err := e.root(dest).ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

// sources maps each record of a destination's catalog to "pipeline
// source-id@created".
func (e *opEnv) sources(dest string) map[string]string {
	e.t.Helper()
	cat, legacy, err := catalog.Parse(e.catalogBytes(dest))
	if err != nil || legacy {
		e.t.Fatalf("%s catalog: %v (legacy %v)", dest, err, legacy)
	}
	out := map[string]string{}
	for _, o := range cat.Outputs {
		out[o.Path] = o.PipelineID + " " + o.Source.ID + "@" + catalog.FormatTime(o.Source.Created)
	}
	return out
}

func (e *opEnv) wantState(what, dest string, files, sources map[string]string) {
	e.t.Helper()
	if got := e.files(dest); !maps.Equal(got, files) {
		e.t.Errorf("%s: %s holds %v, want %v", what, dest, got, files)
	}
	if got := e.sources(dest); !maps.Equal(got, sources) {
		e.t.Errorf("%s: %s's records %v, want %v", what, dest, got, sources)
	}
}

// validate checks a command's --json output against its schema.
func (e *opEnv) validate(schema, stdout string) {
	e.t.Helper()
	if err := e.schemas.Validate(e.t, schema, []byte(stdout)); err != nil {
		e.t.Errorf("output does not match docs/schema/%s: %v\n%s", schema, err, stdout)
	}
}

// table formats rows as the commands' tabwriter does.
func table(indent string, rows ...[]string) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 2, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	return b.String()
}

func label(b testBundle) string {
	return b.ID + "@" + catalog.FormatTime(b.Created) + " " + b.Digest[:len("sha256:")+12]
}

var created0 = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)

// TestOperatorCommands: status, history and rollback on a replacement and
// an additive destination, through serve and directly, on both backends:
// what is live per owner and version, the results newest first with their
// bundle locations, a roll back by digest and by event id after which the
// producer's next newer bundle publishes normally, and a roll back to a
// bundle that is gone, which writes and announces nothing.
func TestOperatorCommands(t *testing.T) {
	for _, backend := range []string{"local", "s3"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "s3" && os.Getenv(testenv.EnvS3Endpoint) != "" {
				t.Skip("needs the in-process S3 server's static credentials")
			}
			testOperatorCommands(t, newOpEnv(t, backend))
		})
	}
}

func testOperatorCommands(t *testing.T, e *opEnv) {
	startServe(t, e.cfg)
	v1 := e.bundle("v1", "src.one", created0, map[string]string{"a.txt": "a1\n", "old.txt": "old\n"})
	tide := e.bundle("tide", "tide.now", created0, map[string]string{"tide.txt": "high\n"})
	v2 := e.bundle("v2", "src.one", created0.Add(time.Hour), map[string]string{"a.txt": "a2\n", "b.txt": "b2\n"})
	v3 := e.bundle("v3", "src.one", created0.Add(2*time.Hour), map[string]string{"a.txt": "a3\n"})

	v1ID := e.publish(0, "p.one", v1)
	tideID := e.publish(0, "p.two", tide)
	v2ID := e.publish(0, "p.one", v2)
	at := func(b testBundle) string { return b.ID + "@" + catalog.FormatTime(b.Created) }
	e.wantState("after v1, tide, v2", "rep", map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "tide.txt": "high\n"},
		map[string]string{"a.txt": "p.one " + at(v2), "b.txt": "p.one " + at(v2), "tide.txt": "p.two " + at(tide)})
	e.wantState("after v1, v2", "add", map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v2), "b.txt": "p.one " + at(v2), "old.txt": "p.one " + at(v1)})

	// status: two owners in the replacement root, two versions side by
	// side in the additive one, the last publication with its bundle.
	out := e.must(0, e.cmd, "status", "--json")
	e.validate("cli-status.json", out)
	var st statusJSON
	decodeJSON(t, "status --json", out, &st)
	if !st.NATS.Known || len(st.Destinations) != 2 {
		t.Fatalf("status --json: %s", out)
	}
	rep, add := st.Destinations[0], st.Destinations[1]
	owners := func(d destStatusJSON) string {
		var b strings.Builder
		for _, o := range d.Owners {
			fmt.Fprintf(&b, "%s/%s %d %d:", o.PipelineID, o.DestinationID, o.Outputs, o.Bytes)
			for _, s := range o.Sources {
				fmt.Fprintf(&b, " %s %s %d %d", s.ID+"@"+catalog.FormatTime(s.Created), s.Digest, s.Outputs, s.Bytes)
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	if got, want := owners(rep), fmt.Sprintf("p.one/rep 2 6: %s %s 2 6; p.two/rep 1 5: %s %s 1 5; ", at(v2), v2.Digest, at(tide), tide.Digest); got != want {
		t.Errorf("status rep owners:\n got %s\nwant %s", got, want)
	}
	if got, want := owners(add), fmt.Sprintf("p.one/add 3 10: %s %s 2 6 %s %s 1 4; ", at(v2), v2.Digest, at(v1), v1.Digest); got != want {
		t.Errorf("status add owners:\n got %s\nwant %s", got, want)
	}
	for _, d := range st.Destinations {
		if d.PendingRecovery || d.Leftovers == nil || d.Leftovers.Count != 0 || d.Lease.KV != nil || d.Lease.Lock != nil || d.Error != "" ||
			d.LastPublished == nil || d.LastPublished.Bundle != v2.Dir || d.LastPublished.Source == nil || d.LastPublished.Source.Digest != v2.Digest ||
			d.LastPublished.EventID != v2ID+"."+d.DestinationID || d.LastFailure != nil || d.Backend != e.backend || len(d.OtherOwners) != 0 {
			t.Errorf("status %s: %+v", d.DestinationID, d)
		}
	}
	if rep.Workflow != "replacement" || add.Workflow != "additive" || !slices.Equal(rep.Pipelines, []string{"p.one", "p.two"}) ||
		rep.Catalog.Outputs != 3 || rep.Catalog.Bytes != 11 || add.Catalog.Outputs != 3 {
		t.Errorf("status: rep %+v, add %+v", rep, add)
	}
	out = e.must(0, e.cmd, "status", "--destination", "rep")
	lp := rep.LastPublished
	// The health line says how long ago the last publication was: just
	// now, or seconds ago on a busy machine.
	health := regexp.MustCompile(`(?m)^  health: 3 published, last (just now|\d+s ago) · 0 failing · 0 superseded$`)
	if !health.MatchString(out) {
		t.Errorf("status --destination rep has no health line matching %s:\n%s", health, out)
	}
	out = health.ReplaceAllString(out, "  health: …")
	want := fmt.Sprintf("rep (%s, %s, replacement)\n  health: …\n  catalog: 3 output(s), 11 bytes, updated %s\n", rep.Root, e.backend, catalog.FormatTime(*rep.Catalog.UpdatedAt)) +
		table("  ", []string{"PIPELINE", "SOURCE", "OUTPUTS", "BYTES", "UPDATED"},
			[]string{"p.one", label(v2), "2", "6", catalog.FormatTime(rep.Owners[0].Sources[0].UpdatedAt)},
			[]string{"p.two", label(tide), "1", "5", catalog.FormatTime(rep.Owners[1].Sources[0].UpdatedAt)}) +
		"  pending recovery: none\n  leftovers: none\n  lease (NATS): free\n  lock object: free\n" +
		fmt.Sprintf("  last published: %s p.one %s from %s: 2 written, 1 deleted, 0 unchanged (event %s.rep)\n", catalog.FormatTime(lp.Time), label(v2), v2.Dir, v2ID) +
		"  last failure: none in the events stream\n"
	if out != want {
		t.Errorf("status --destination rep:\n%s\nwant:\n%s", out, want)
	}

	// history: newest first, with bundle locations.
	out = e.must(0, e.cmd, "history", "--destination", "rep", "--json")
	e.validate("cli-history.json", out)
	var h historyJSON
	decodeJSON(t, "history --json", out, &h)
	type entry struct{ typ, event, pipeline, bundle, digest string }
	entries := func(h historyJSON) []entry {
		var out []entry
		for _, x := range h.Entries {
			d := ""
			if x.Source != nil {
				d = x.Source.Digest
			}
			out = append(out, entry{x.Type, x.EventID, x.PipelineID, x.Bundle, d})
		}
		return out
	}
	wantEntries := []entry{
		{"published", v2ID + ".rep", "p.one", v2.Dir, v2.Digest},
		{"published", tideID + ".rep", "p.two", tide.Dir, tide.Digest},
		{"published", v1ID + ".rep", "p.one", v1.Dir, v1.Digest},
	}
	if got := entries(h); !slices.Equal(got, wantEntries) || h.DestinationID != "rep" {
		t.Errorf("history rep:\n got %v\nwant %v", got, wantEntries)
	}
	out = e.must(0, e.cmd, "history", "--destination", "rep", "--pipeline", "p.one", "--limit", "1")
	want = table("", []string{"TIME", "TYPE", "PIPELINE", "SOURCE", "BUNDLE", "RESULT", "EVENT"},
		[]string{catalog.FormatTime(h.Entries[0].Time), "published", "p.one", label(v2), v2.Dir, "2 written, 1 deleted, 0 unchanged", v2ID + ".rep"})
	if out != want {
		t.Errorf("history --pipeline p.one --limit 1:\n%s\nwant:\n%s", out, want)
	}

	// A roll back of rep to v1 by its digest, through serve: rep holds
	// exactly v1's outputs for p.one again; p.two's stay.
	before := e.bundleMsgs()
	out = e.must(0, e.cmd, "rollback", "--destination", "rep", "--to", v1.Digest[:len("sha256:")+10])
	ann := e.lastAdminEvent("p.one")
	if e.bundleMsgs() != before+1 || !ann.AllowOlder || ann.RollbackOf != v1ID+".rep" || ann.Bundle != v1.Dir || ann.ManifestDigest != v1.Digest ||
		!slices.Equal(ann.Destinations, []string{"rep"}) {
		t.Errorf("rollback announced %+v", ann)
	}
	res := e.result(ann.ID, "rep")
	if res.Type != events.TypePublished || res.RollbackOf != v1ID+".rep" || res.Bundle != v1.Dir || res.Source == nil || res.Source.Digest != v1.Digest {
		t.Errorf("rollback's result %+v", res)
	}
	want = fmt.Sprintf("rolling back rep (p.one) to %s from %s (published %s as event %s.rep)\nannounced %s on the admin subject; waiting for serve\n",
		label(v1), v1.Dir, h.Entries[2].Time.Format(time.RFC3339), v1ID, ann.ID)
	if !strings.HasPrefix(out, want) {
		t.Errorf("rollback printed:\n%s\nwant it to start with:\n%s", out, want)
	}
	assertBlocks(t, "rollback", out, "published rep p.one written 2, unchanged 0, deleted 1 | + a.txt | + old.txt | - b.txt")
	e.wantState("after the roll back to v1", "rep", map[string]string{"a.txt": "a1\n", "old.txt": "old\n", "tide.txt": "high\n"},
		map[string]string{"a.txt": "p.one " + at(v1), "old.txt": "p.one " + at(v1), "tide.txt": "p.two " + at(tide)})

	// The additive destination by the published event's id: v1's paths;
	// what only the newer v2 brought (b.txt) stays, unless --delete-later.
	e.must(0, e.cmd, "rollback", "--destination", "add", "--to", v1ID+".add")
	if ann := e.lastAdminEvent("p.one"); !ann.AllowOlder || ann.DeleteLater {
		t.Errorf("rollback announced %+v", ann)
	}
	e.wantState("after the roll back to v1", "add", map[string]string{"a.txt": "a1\n", "b.txt": "b2\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v1), "b.txt": "p.one " + at(v2), "old.txt": "p.one " + at(v1)})
	e.must(0, e.cmd, "rollback", "--destination", "add", "--to", v1ID+".add", "--delete-later")
	if ann := e.lastAdminEvent("p.one"); !ann.AllowOlder || !ann.DeleteLater {
		t.Errorf("rollback --delete-later announced %+v", ann)
	}
	e.wantState("after the roll back to v1 deleting later paths", "add", map[string]string{"a.txt": "a1\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v1), "old.txt": "p.one " + at(v1)})

	// history shows the roll back first.
	out = e.must(0, e.cmd, "history", "--destination", "rep", "--limit", "1", "--json")
	h = historyJSON{}
	decodeJSON(t, "history --json", out, &h)
	if len(h.Entries) != 1 || h.Entries[0].RollbackOf != v1ID+".rep" || h.Entries[0].EventID != ann.ID+".rep" || h.Entries[0].Bundle != v1.Dir {
		t.Errorf("history after the roll back: %s", out)
	}

	// The producer's next newer version publishes normally.
	e.publish(0, "p.one", v3)
	e.wantState("after v3", "rep", map[string]string{"a.txt": "a3\n", "tide.txt": "high\n"},
		map[string]string{"a.txt": "p.one " + at(v3), "tide.txt": "p.two " + at(tide)})
	e.wantState("after v3", "add", map[string]string{"a.txt": "a3\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v3), "old.txt": "p.one " + at(v1)})

	// --dry-run: the plan, nothing announced or written.
	before, catBefore := e.bundleMsgs(), e.catalogBytes("rep")
	out = e.must(0, e.cmd, "rollback", "--destination", "rep", "--to", v2.Digest, "--dry-run", "--json")
	e.validate("cli-rollback.json", out)
	var rb rollbackJSON
	decodeJSON(t, "rollback --dry-run --json", out, &rb)
	if rb.Via != "serve" || !rb.DryRun || rb.Plan == nil || *rb.Plan != (counts{Create: 1, Update: 1, Delete: 0}) || rb.Result != nil ||
		rb.Version.EventID != v2ID+".rep" || rb.Version.Bundle != v2.Dir || rb.EventID != "" {
		t.Errorf("rollback --dry-run --json: %s", out)
	}
	out = e.must(0, e.cmd, "rollback", "--destination", "rep", "--to", v2ID+".rep", "--dry-run")
	want = fmt.Sprintf("rolling back rep (p.one) to %s from %s (published %s as event %s.rep)\n", label(v2), v2.Dir, rb.Version.Time.Format(time.RFC3339), v2ID) +
		fmt.Sprintf("rep (%s, replacement)\n  ~ a.txt\n  + b.txt\n  would create 1, update 1, delete 0; 0 unchanged, 0 collision\n", rep.Root) +
		"dry run: nothing announced or written (the roll back would go through serve)\n"
	if out != want {
		t.Errorf("rollback --dry-run:\n%s\nwant:\n%s", out, want)
	}
	if e.bundleMsgs() != before || !bytes.Equal(e.catalogBytes("rep"), catBefore) {
		t.Errorf("rollback --dry-run announced or wrote something")
	}

	// A dry run whose plan fails (a local root moved away) shows no plan,
	// only the error.
	if moved := rep.Root + ".moved"; filepath.IsAbs(rep.Root) {
		if err := os.Rename(rep.Root, moved); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := e.cmd("rollback", "--destination", "rep", "--to", v2.Digest, "--dry-run")
		want := fmt.Sprintf("rolling back rep (p.one) to %s from %s (published %s as event %s.rep)\n", label(v2), v2.Dir, rb.Version.Time.Format(time.RFC3339), v2ID)
		if code == exitOK || stdout != want || !strings.Contains(stderr, rep.Root) {
			t.Errorf("rollback --dry-run into a missing root: exit %d, stdout %q, stderr %q; want a failure, %q and the root named", code, stdout, stderr, want)
		}
		if err := os.Rename(moved, rep.Root); err != nil {
			t.Fatal(err)
		}
	}

	// A bundle that is gone: a clear error naming it, nothing announced or
	// written.
	if err := os.RemoveAll(v2.Dir); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.cmd("rollback", "--destination", "rep", "--to", v2.Digest)
	if want := fmt.Sprintf("distributor: cannot roll back rep to %s: its bundle %s is gone (no manifest.json): restore it there, or give --bundle with the location of a copy\n", label(v2), v2.Dir); code != exitFailed || stdout != "" || stderr != want {
		t.Errorf("rollback to a gone bundle: exit %d, stdout %q, stderr\n %q\nwant %d and\n %q", code, stdout, stderr, exitFailed, want)
	}
	if e.bundleMsgs() != before || !bytes.Equal(e.catalogBytes("rep"), catBefore) {
		t.Errorf("rollback to a gone bundle announced or wrote something")
	}
	code, stdout, _ = e.cmd("rollback", "--destination", "rep", "--to", v2.Digest, "--json")
	e.validate("cli-rollback.json", stdout)
	rb = rollbackJSON{}
	decodeJSON(t, "rollback --json of a gone bundle", stdout, &rb)
	if code != exitFailed || rb.Error == "" || rb.Result != nil || rb.Version.Bundle != v2.Dir {
		t.Errorf("rollback --json to a gone bundle: exit %d, %s", code, stdout)
	}
	// An unknown version, an event that is no publication: usage.
	for _, c := range []struct{ to, line string }{
		{"sha256:00000000", "distributor: unknown version: no published event of rep in the events stream has digest sha256:00000000 (it keeps results for nats.event_max_age, 30 days by default): `distributor history --destination rep` lists what it has; give --bundle LOCATION to roll back to that bundle anyway\n"},
		{"nope", "distributor: unknown version: no published event nope of rep in the events stream (it keeps results for nats.event_max_age, 30 days by default): `distributor history --destination rep` lists what it has; name a version by its digest (sha256:…) with --bundle to roll back to an older one\n"},
	} {
		if code, stdout, stderr := e.cmd("rollback", "--destination", "rep", "--to", c.to); code != exitUsage || stdout != "" || stderr != c.line {
			t.Errorf("rollback --to %s: exit %d, stdout %q, stderr\n %q\nwant %d and\n %q", c.to, code, stdout, stderr, exitUsage, c.line)
		}
	}

	// Without NATS: status still answers from the roots; rollback needs
	// the digest and the bundle, and publishes directly.
	out = e.must(0, e.direct, "status", "--json", "--destination", "add")
	e.validate("cli-status.json", out)
	st = statusJSON{}
	decodeJSON(t, "status --json without NATS", out, &st)
	if st.NATS.Known || len(st.Destinations) != 1 || st.Destinations[0].LastPublished != nil || len(st.Destinations[0].Owners) != 1 ||
		len(st.Destinations[0].Owners[0].Sources) != 2 {
		t.Errorf("status --json without NATS: %s", out)
	}
	for _, c := range []struct {
		args []string
		line string
	}{
		{[]string{"--to", v1ID + ".rep"}, fmt.Sprintf("distributor: --to %q: without NATS (set nats.url or start `distributor serve`) there is no history to find an event in: give the version's digest (--to sha256:…) and its --bundle LOCATION\n", v1ID+".rep")},
		{[]string{"--to", v1.Digest}, fmt.Sprintf("distributor: --to %s: without NATS (set nats.url or start `distributor serve`) distributor cannot know where that version's bundle is: give --bundle LOCATION\n", v1.Digest)},
	} {
		if code, stdout, stderr := e.direct(append([]string{"rollback", "--destination", "rep"}, c.args...)...); code != exitUsage || stdout != "" || stderr != c.line {
			t.Errorf("rollback %v without NATS: exit %d, stdout %q, stderr\n %q\nwant %d and\n %q", c.args, code, stdout, stderr, exitUsage, c.line)
		}
	}
	out = e.must(0, e.direct, "rollback", "--destination", "rep", "--to", v1.Digest[:len("sha256:")+8], "--bundle", v1.Dir, "--json")
	e.validate("cli-rollback.json", out)
	rb = rollbackJSON{}
	decodeJSON(t, "rollback --json direct", out, &rb)
	if rb.Via != "direct" || rb.PipelineID != "p.one" || rb.Result == nil || rb.Result.Type != events.TypePublished || rb.Result.RollbackOf != v1.Digest ||
		rb.Result.Bundle != v1.Dir || rb.Version.Digest != v1.Digest {
		t.Errorf("rollback --json direct: %s", out)
	}
	e.wantState("after the direct roll back to v1", "rep", map[string]string{"a.txt": "a1\n", "old.txt": "old\n", "tide.txt": "high\n"},
		map[string]string{"a.txt": "p.one " + at(v1), "old.txt": "p.one " + at(v1), "tide.txt": "p.two " + at(tide)})
	out = e.must(0, e.direct, "rollback", "--destination", "add", "--to", v1.Digest, "--bundle", v1.Dir)
	if want := fmt.Sprintf("rolling back add (p.one) to %s from %s\nadd (%s, additive)\n  ~ a.txt\n  0 create, 1 update, 1 unchanged, 0 delete, 0 collision\n", label(v1), v1.Dir, add.Root); out != want {
		t.Errorf("rollback add directly:\n%s\nwant:\n%s", out, want)
	}
	e.wantState("after the direct roll back to v1", "add", map[string]string{"a.txt": "a1\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v1), "old.txt": "p.one " + at(v1)})

	// ... and the producer's next newer version, applied directly too.
	v4 := e.bundle("v4", "src.one", created0.Add(3*time.Hour), map[string]string{"a.txt": "a4\n"})
	e.must(0, e.direct, "apply", "--pipeline", "p.one", "--bundle", v4.Dir)
	e.wantState("after v4", "rep", map[string]string{"a.txt": "a4\n", "tide.txt": "high\n"},
		map[string]string{"a.txt": "p.one " + at(v4), "tide.txt": "p.two " + at(tide)})
	e.wantState("after v4", "add", map[string]string{"a.txt": "a4\n", "old.txt": "old\n"},
		map[string]string{"a.txt": "p.one " + at(v4), "old.txt": "p.one " + at(v1)})

	// Every event serve and the commands published matches its schema.
	e.schemas.CheckEventsStream(t, e.nats.JetStream(t), events.Subjects{})
}

// bundleMsgs is the number of messages in the bundle-ready stream.
func (e *opEnv) bundleMsgs() uint64 {
	e.t.Helper()
	return (&natsEnv{nats: e.nats}).bundleMsgs(e.t)
}

func (e *opEnv) lastAdminEvent(pipeline string) events.BundleReady {
	e.t.Helper()
	return (&natsEnv{nats: e.nats}).lastAdminEvent(e.t, pipeline)
}

// result waits for the result event of a bundle event for a destination.
func (e *opEnv) result(bundleEventID, dest string) events.Result {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := e.must(0, e.cmd, "events", "tail", "--json", "--destination", dest)
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			var r events.Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				e.t.Fatal(err)
			}
			if r.BundleEventID == bundleEventID {
				return r
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no result of %s for %s after 20s in:\n%s", bundleEventID, dest, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplayAllowOlderRepublishesSuperseded: the documented roll back
// after a superseded event works: the hint of publish --wait names the
// command, replay --id without --allow-older says what is missing, a
// replay without --id never rolls back, and with both the older version
// is published and then counts as replayed.
func TestReplayAllowOlderRepublishesSuperseded(t *testing.T) {
	t.Parallel()
	e := newOpEnv(t, "local")
	startServe(t, e.cfg)
	v1 := e.bundle("v1", "src.one", created0, map[string]string{"a.txt": "a1\n", "old.txt": "old\n"})
	v2 := e.bundle("v2", "src.one", created0.Add(time.Hour), map[string]string{"a.txt": "a2\n"})
	e.publish(0, "p.one", v1, "rep")
	e.publish(0, "p.one", v2, "rep")

	code, stdout, stderr := e.cmd("publish", "--wait", "--pipeline", "p.one", "--destination", "rep", "--bundle", v1.Dir)
	id := announcedID(t, stdout)
	if want := "distributor: not published to rep: superseded by a newer version of the source (see the events above); `distributor replay --id " + id + " --allow-older` publishes it over the newer version (a roll back)\n"; code != exitRefused || stderr != want {
		t.Fatalf("publish of the older bundle: exit %d, stderr\n %q\nwant %d and\n %q", code, stderr, exitRefused, want)
	}
	sup := e.result(id, "rep")
	if sup.Type != events.TypeSuperseded || sup.Bundle != v1.Dir || sup.Source == nil || sup.Source.Digest != v1.Digest {
		t.Fatalf("superseded event %+v", sup)
	}

	before := e.bundleMsgs()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", id}, "nothing to replay: " + id + ".rep was superseded by a newer version of its source; `distributor replay --id " + id + " --allow-older` publishes it anyway (a roll back)\n"},
		{[]string{"--id", sup.ID}, "nothing to replay: " + id + ".rep was superseded by a newer version of its source; `distributor replay --id " + id + ".rep --allow-older` publishes it anyway (a roll back)\n"},
		{[]string{"--allow-older"}, "nothing to replay: no failed or collision event matches\n"},
	} {
		if code, stdout, stderr := e.cmd(append([]string{"replay"}, c.args...)...); code != 0 || stdout != c.want || stderr != "" {
			t.Errorf("replay %v: exit %d, stdout %q, stderr %q; want 0 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
	if e.bundleMsgs() != before {
		t.Fatalf("a replay that replays nothing announced something")
	}
	e.wantState("after the superseded publication", "rep", map[string]string{"a.txt": "a2\n"}, map[string]string{"a.txt": "p.one src.one@" + catalog.FormatTime(v2.Created)})

	out := e.must(0, e.cmd, "replay", "--id", id, "--allow-older")
	ann := e.lastAdminEvent("p.one")
	if want := fmt.Sprintf("replayed %s as %s (destinations [rep])\n", id, ann.ID); out != want || !ann.AllowOlder || ann.ReplayOf != id ||
		ann.Bundle != v1.Dir || ann.ManifestDigest != v1.Digest || e.bundleMsgs() != before+1 {
		t.Fatalf("replay --allow-older printed %q (want %q), announced %+v", out, want, ann)
	}
	if r := e.result(ann.ID, "rep"); r.Type != events.TypePublished || r.Bundle != v1.Dir || r.RollbackOf != "" {
		t.Errorf("the replay's result %+v", r)
	}
	at1 := "p.one src.one@" + catalog.FormatTime(v1.Created)
	e.wantState("after replay --allow-older", "rep", map[string]string{"a.txt": "a1\n", "old.txt": "old\n"}, map[string]string{"a.txt": at1, "old.txt": at1})
	if out := e.must(0, e.cmd, "replay", "--id", id, "--allow-older"); out != "nothing to replay: the 1 matching bundle event(s) were already replayed and published\n" {
		t.Errorf("second replay --allow-older printed %q", out)
	}
}
