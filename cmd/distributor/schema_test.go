package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv/schematest"
)

// TestEventsAndCatalogsMatchSchemas runs serve and the CLI through a
// publication, a collision, an adoption, a superseded bundle, failures
// (unknown pipeline, root_missing, an undecodable event, operator flags on
// the producer subject), a reconcile and a prune, then checks every message
// in both streams and every catalog written against docs/schema.
func TestEventsAndCatalogsMatchSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemas := schematest.New(t)
	e := newNATSEnv(t)
	e.setWorkflow(t, "d2", "replacement") // so that an older bundle is superseded there
	startServe(t, e.cfg)
	js := e.nats.JetStream(t)
	subjects := events.Subjects{}
	mustExitAt := func(now time.Time, want int, args ...string) string {
		t.Helper()
		var clock func() time.Time // the real one
		if !now.IsZero() {
			clock = func() time.Time { return now }
		}
		code, stdout, stderr := runCmdAt(t, clock, append(args, "--config", e.cfg)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, stdout, stderr)
		}
		return stdout
	}
	mustExit := func(want int, args ...string) string {
		t.Helper()
		return mustExitAt(time.Time{}, want, args...)
	}

	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	mustExit(0, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)

	// A collision on d1, then its replay adopting the unmanaged file.
	if err := os.WriteFile(filepath.Join(e.roots["d1"], "new.txt"), []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}
	b2 := e.makeBundle(t, "b2", "src.one", map[string]string{"new.txt": "from the bundle"})
	mustExit(exitRefused, "publish", "--wait", "--pipeline", "p.one", "--bundle", b2)
	lastD2Write := time.Now()
	col := e.waitEvent(t, func(r events.Result) bool { return r.Type == events.TypeCollision }, "--type", "collision")
	mustExit(0, "replay", "--id", col.BundleEventID, "--take-ownership")
	e.waitEvent(t, func(r events.Result) bool { return len(r.Adopted) > 0 }, "--type", "published")

	// An older version of the source: superseded on d2 (replacement),
	// published with its newer path kept on d1 (additive).
	b0 := e.makeBundle(t, "b0", "src.one", map[string]string{"report.md": "# Last year\n", "last-year.txt": "old\n"})
	mustExit(0, "bundle", "create", b0, "--id", "src.one", "--created", "2025-01-01T00:00:00Z")
	mustExit(exitRefused, "publish", "--wait", "--pipeline", "p.one", "--bundle", b0)

	mustExit(exitUsage, "publish", "--wait", "--pipeline", "p.nope", "--bundle", b1)

	// Producers that do not use distributor: garbage, and operator flags
	// on the producer subject.
	if _, err := js.Publish(ctx, subjects.BundleReady("p.one"), []byte(`{"schema_version":1,"type":"bundle.ready"`)); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(t, func(r events.Result) bool { return strings.HasPrefix(r.ID, "invalid.") }, "--type", "failed")
	flagged := events.BundleReady{SchemaVersion: 1, Type: events.TypeBundleReady, ID: "flagged-1", PipelineID: "p.one",
		Bundle: b1, ManifestDigest: digestOfFile(t, filepath.Join(b1, "manifest.json")), TakeOwnership: true}
	data, err := flagged.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subjects.BundleReady("p.one"), data, jetstream.WithMsgID(flagged.ID)); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == flagged.ID }, "--type", "failed")

	// A destination root that is gone.
	if err := os.RemoveAll(e.roots["d3"]); err != nil {
		t.Fatal(err)
	}
	mustExit(exitFailed, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)

	// Maintenance: a record whose file is gone, and outputs past their age.
	if err := os.Remove(filepath.Join(e.roots["d1"], "data.csv")); err != nil {
		t.Fatal(err)
	}
	mustExit(0, "reconcile-state", "--all-owners", "--destination", "d1")
	// Past the cutoff of d2's last write on prune's clock, not by waiting.
	mustExitAt(lastD2Write.Add(2100*time.Millisecond), 0, "prune", "--pipeline", "p.one", "--destination", "d2", "--older-than", "1s")
	e.waitEvent(t, func(r events.Result) bool { return r.Type == events.TypePruned }, "--type", "pruned")

	got := schemas.CheckEventsStream(t, js, subjects)
	types, reasons := map[string]int{}, map[string]bool{}
	for _, ev := range got {
		types[ev.Result.Type]++
		reasons[ev.Result.Reason] = true
	}
	for _, typ := range []string{events.TypePublished, events.TypeSuperseded, events.TypeCollision, events.TypeFailed, events.TypePruned, events.TypeReconciled} {
		if types[typ] == 0 {
			t.Errorf("no %s event in the stream (%v)", typ, types)
		}
	}
	for _, r := range []string{events.ReasonUnknownPipeline, events.ReasonRootMissing, events.ReasonInvalidEvent} {
		if !reasons[r] {
			t.Errorf("no failed / %s event in the stream", r)
		}
	}

	// `events tail --json` prints the same documents.
	_, tail, _ := e.cmd(t, "events", "tail", "--json")
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	if len(lines) != len(got) {
		t.Errorf("events tail --json printed %d lines, the stream holds %d events", len(lines), len(got))
	}
	for _, line := range lines {
		if err := schemas.Validate(t, "result.json", []byte(line)); err != nil {
			t.Errorf("events tail --json line does not match result.json: %v\n%s", err, line)
		}
	}

	// Every bundle-ready event stored matches the schema of its subject,
	// except the two bad ones, which the producer schema rejects as serve did.
	st := e.bundleStream(t)
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var admin, producer, rejected int
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		bad := m.Header.Get(jetstream.MsgIDHeader) == "" || m.Header.Get(jetstream.MsgIDHeader) == flagged.ID
		ref := "bundle-ready.json"
		if subjects.IsAdmin(m.Subject) {
			ref += "#/$defs/admin"
			admin++
		} else {
			producer++
		}
		err = schemas.Validate(t, ref, m.Data)
		switch {
		case bad && err == nil:
			t.Errorf("seq %d on %s: serve rejected it, %s accepts it:\n%s", seq, m.Subject, ref, m.Data)
		case bad:
			rejected++
		case err != nil:
			t.Errorf("seq %d on %s does not match %s: %v\n%s", seq, m.Subject, ref, err, m.Data)
		}
	}
	if admin == 0 || producer == 0 || rejected != 2 {
		t.Errorf("bundle stream: %d admin, %d producer events, %d rejected; want some of each and 2 rejected", admin, producer, rejected)
	}

	// The catalogs these runs wrote.
	for _, d := range []string{"d1", "d2"} {
		data, err := os.ReadFile(filepath.Join(e.roots[d], catalog.FileName))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(t, "catalog-v4.json", data); err != nil {
			t.Errorf("%s's catalog does not match docs/schema/catalog-v4.json: %v\n%s", d, err, data)
		}
	}
	if paths := catalogPaths(t, e.roots["d1"]); !slices.Contains(paths, "new.txt") || slices.Contains(paths, "data.csv") {
		t.Errorf("d1 catalog %v: want the adopted new.txt and no data.csv", paths)
	}
}

func digestOfFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return sha(string(data))
}
