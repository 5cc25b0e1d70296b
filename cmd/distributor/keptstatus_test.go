package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv/schematest"
)

// status shows a result an attempt kept in the root because it could not
// deliver it (NATS away), in its line and in --json, for its destination
// only; the JSON matches docs/schema/cli-status.json.
func TestStatusShowsUndeliveredKeptResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newNATSEnv(t)
	root, err := stores.New(nil).Destination(ctx, config.Destination{ID: "d1", Backend: config.BackendLocal, Path: e.roots["d1"]})
	if err != nil {
		t.Fatal(err)
	}
	r := events.Result{SchemaVersion: events.SchemaVersion, Type: events.TypePublished, BundleEventID: "ev-kept", PipelineID: "p.one", DestinationID: "d1", Attempts: 1}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&engine.Engine{}).KeepResult(ctx, root, "ev-kept", catalog.Owner{PipelineID: "p.one", DestinationID: "d1"}, data); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := e.cmd(t, "status", "--destination", "d1")
	if code != 0 || !strings.Contains(stdout, "\n  undelivered result: published of event ev-kept (p.one), kept in the root since ") ||
		!strings.Contains(stdout, "; serve delivers it with the event's next attempt, or by itself once it is 10m0s old\n") {
		t.Fatalf("status: exit %d, stdout:\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = e.cmd(t, "status", "--json")
	var st statusJSON
	decodeJSON(t, "status --json", stdout, &st)
	if err := schematest.New(t).Validate(t, "cli-status.json", []byte(stdout)); err != nil {
		t.Errorf("status --json against cli-status.json: %v", err)
	}
	got := map[string]int{}
	for _, d := range st.Destinations {
		got[d.DestinationID] = len(d.UndeliveredResults)
		if d.DestinationID == "d1" && (code != 0 || len(d.UndeliveredResults) != 1 || d.UndeliveredResults[0].BundleEventID != "ev-kept" ||
			d.UndeliveredResults[0].PipelineID != "p.one" || d.UndeliveredResults[0].Type != events.TypePublished || d.UndeliveredResults[0].KeptSince.IsZero()) {
			t.Errorf("status --json: exit %d, d1 %+v\n%s", code, d.UndeliveredResults, stderr)
		}
	}
	if got["d1"] != 1 || got["d2"] != 0 || got["d3"] != 0 {
		t.Errorf("undelivered results by destination %v, want d1 only", got)
	}
}
