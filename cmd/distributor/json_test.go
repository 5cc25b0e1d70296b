package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/distributor/distributor/events"
)

// decodeJSON parses a command's whole stdout strictly into v.
func decodeJSON(t *testing.T, what, stdout string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stdout)
	}
	if dec.More() {
		t.Fatalf("%s printed more than one JSON value:\n%s", what, stdout)
	}
}

// Every command that reports something prints one documented JSON value
// with --json (docs/cli.md): publish, replay, prune and reconcile-state
// here; plan, apply and verify in their own tests.
func TestJSONOfPublishReplayPruneReconcile(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	stray := filepath.Join(e.roots["d1"], "report.md")
	if err := os.WriteFile(stray, []byte("hand-made"), 0o644); err != nil {
		t.Fatal(err)
	}

	// publish --json --wait: the announcement and one result per destination.
	code, stdout, _ := e.cmd(t, "publish", "--json", "--wait", "--pipeline", "p.one", "--bundle", b1)
	var pub publishJSON
	decodeJSON(t, "publish --json", stdout, &pub)
	types := map[string]string{}
	for _, r := range pub.Results {
		types[r.DestinationID] = r.Type
	}
	if code != exitRefused || pub.EventID == "" || pub.PipelineID != "p.one" || pub.Bundle != b1 || pub.Seq == 0 || pub.Duplicate ||
		!reflect.DeepEqual(types, map[string]string{"d1": events.TypeCollision, "d2": events.TypePublished}) || pub.Error == "" {
		t.Fatalf("publish --json: exit %d, %+v", code, pub)
	}

	// replay --json: dry run, then for real.
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = e.cmd(t, "replay", "--json", "--dry-run")
	var rep replayJSON
	decodeJSON(t, "replay --json --dry-run", stdout, &rep)
	want := replayJSON{DryRun: true, Replays: []replayedJSON{{OriginalID: pub.EventID, PipelineID: "p.one", Bundle: b1, Destinations: []string{"d1"}}}, Skipped: []skippedJSON{}}
	if code != 0 || !reflect.DeepEqual(rep, want) {
		t.Fatalf("replay --json --dry-run: exit %d\n got %+v\nwant %+v", code, rep, want)
	}
	code, stdout, _ = e.cmd(t, "replay", "--json")
	rep = replayJSON{}
	decodeJSON(t, "replay --json", stdout, &rep)
	if code != 0 || len(rep.Replays) != 1 || rep.Replays[0].EventID == "" || rep.Replays[0].OriginalID != pub.EventID {
		t.Fatalf("replay --json: exit %d, %+v", code, rep)
	}
	e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == rep.Replays[0].EventID }, "--type", "published")

	// prune --json: every output of d2, backdated.
	backdate(t, e.roots["d2"])
	code, stdout, _ = e.cmd(t, "prune", "--json", "--pipeline", "p.one", "--destination", "d2", "--older-than", "30d")
	var pr pruneJSON
	decodeJSON(t, "prune --json", stdout, &pr)
	var paths []string
	for _, o := range pr.Removed {
		paths = append(paths, o.Path)
	}
	if code != 0 || pr.DestinationID != "d2" || pr.PipelineID != "p.one" || pr.DryRun || pr.OlderThan != "30d" ||
		!reflect.DeepEqual(paths, []string{"data.csv", "report.md"}) || pr.Error != "" || pr.Root == "" {
		t.Fatalf("prune --json: exit %d, %+v", code, pr)
	}

	// reconcile-state --json: a record of d1 whose bytes are gone.
	if err := os.Remove(filepath.Join(e.roots["d1"], "data.csv")); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = e.cmd(t, "reconcile-state", "--json", "--pipeline", "p.one", "--destination", "d1")
	var rec []reconcileJSON
	decodeJSON(t, "reconcile-state --json", stdout, &rec)
	if code != 0 || len(rec) != 1 || rec[0].DestinationID != "d1" || len(rec[0].Removed) != 1 || rec[0].Removed[0].Path != "data.csv" ||
		len(rec[0].SizeMismatches) != 0 || rec[0].Leftovers.Count != 0 || rec[0].Error != "" {
		t.Fatalf("reconcile-state --json: exit %d, %+v", code, rec)
	}
}

// publish --json without --wait prints "results": [] as docs/cli.md shows:
// the key is always there, empty when nothing was waited for.
func TestPublishJSONWithoutWaitHasEmptyResults(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--json", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish --json: exit %d: %s", code, stderr)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("publish --json: %v\n%s", err, stdout)
	}
	if got, ok := raw["results"]; !ok || string(got) != "[]" {
		t.Fatalf(`publish --json: "results" is %q (present %v), want []`+"\n%s", got, ok, stdout)
	}
}
