package events_test

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// jsonFields are the JSON names of a struct's fields.
func jsonFields(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("%s.%s has no JSON name", rt.Name(), rt.Field(i).Name)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// properties is the union of the "properties" keys of the schemas at paths
// ("file" or "file#/$defs/name").
func properties(t *testing.T, s *schematest.Set, paths ...string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, p := range paths {
		file, def, _ := strings.Cut(p, "#/$defs/")
		m := s.Raw(t, file)
		if def != "" {
			m = m["$defs"].(map[string]any)[def].(map[string]any)
		}
		for k := range m["properties"].(map[string]any) {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// TestSchemasNameEveryField: a field added to an event type (or removed from
// it) without the same change in docs/schema fails here.
func TestSchemasNameEveryField(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	for _, tc := range []struct {
		goType  any
		schemas []string
	}{
		{events.BundleReady{}, []string{"bundle-ready.json", "bundle-ready.json#/$defs/fields", "bundle-ready.json#/$defs/admin"}},
		{events.Result{}, []string{"defs.json#/$defs/result_common", "published.json", "superseded.json", "collision.json", "failed.json", "pruned.json", "reconciled.json"}},
		{events.OutputRef{}, []string{"defs.json#/$defs/output_changed", "defs.json#/$defs/output_deleted", "defs.json#/$defs/output_removed"}},
		{events.SourceRef{}, []string{"defs.json#/$defs/source_ref"}},
	} {
		got, want := properties(t, s, tc.schemas...), jsonFields(t, tc.goType)
		if !slices.Equal(got, want) {
			t.Errorf("%T: docs/schema names %v, the Go type has %v", tc.goType, got, want)
		}
	}
	// Every result type has its schema, and result.json refers to each.
	oneOf := s.Raw(t, "result.json")["oneOf"].([]any)
	for i, typ := range []string{events.TypePublished, events.TypeSuperseded, events.TypeCollision, events.TypeFailed, events.TypePruned, events.TypeReconciled} {
		if got := s.Raw(t, typ+".json")["properties"].(map[string]any)["type"].(map[string]any)["const"]; got != typ {
			t.Errorf("docs/schema/%s.json: type const %v", typ, got)
		}
		if ref := oneOf[i].(map[string]any)["$ref"]; ref != typ+".json" {
			t.Errorf("result.json oneOf[%d] = %v, want %s.json", i, ref, typ)
		}
	}
}

// TestBundleReadySchemaAgreesWithDecoder: the admin variant of
// bundle-ready.json accepts exactly what DecodeBundleReady accepts.
func TestBundleReadySchemaAgreesWithDecoder(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	valid := `{"schema_version":1,"type":"bundle.ready","id":"e1","pipeline_id":"w.daily","bundle":"/b","manifest_digest":"` + digest + `"}`
	repl := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("test bug: %q not in valid event", old)
		}
		return strings.Replace(valid, old, new, 1)
	}
	field := func(kv string) string { return repl(`"bundle"`, kv+`,"bundle"`) }
	cases := []struct {
		name  string
		in    string
		valid bool
	}{
		{"minimal", valid, true},
		{"every field", field(`"produced_at":"2026-06-19T12:00:00.5+02:00","destinations":["latest-html","w_2"],"replay_of":"x","take_ownership":true,"allow_older":false,"rollback_of":"e0.latest-html"`), true},
		{"empty destinations", field(`"destinations":[]`), true},
		{"pipeline with underscore part", repl(`"w.daily"`, `"_.x"`), true},
		{"unicode id", repl(`"e1"`, `"événement-1"`), true},
		{"not an object", `[]`, false},
		{"unknown field", field(`"extra":1`), false},
		{"string schema_version", repl(`"schema_version":1`, `"schema_version":"1"`), false},
		{"missing schema_version", repl(`"schema_version":1,`, ``), false},
		{"schema_version 2", repl(`"schema_version":1`, `"schema_version":2`), false},
		{"wrong type", repl(`"bundle.ready"`, `"published"`), false},
		{"missing id", repl(`"id":"e1",`, ``), false},
		{"empty id", repl(`"e1"`, `""`), false},
		{"id with space", repl(`"e1"`, `"e 1"`), false},
		{"id with tab", repl(`"e1"`, `"e\t1"`), false},
		{"id with NBSP", repl(`"e1"`, `"e\u00a01"`), false},
		{"id with line separator", repl(`"e1"`, `"e\u20281"`), false},
		{"id with ideographic space", repl(`"e1"`, `"e\u30001"`), false},
		{"id with C1 control", repl(`"e1"`, `"e\u00851"`), false},
		{"id with replacement char", repl(`"e1"`, `"e\ufffd1"`), false},
		{"empty pipeline", repl(`"w.daily"`, `""`), false},
		{"pipeline underscore", repl(`"w.daily"`, `"_"`), false},
		{"pipeline wildcard", repl(`"w.daily"`, `"w.*"`), false},
		{"pipeline gt", repl(`"w.daily"`, `"w.>"`), false},
		{"pipeline space", repl(`"w.daily"`, `"w daily"`), false},
		{"pipeline empty part", repl(`"w.daily"`, `"w..daily"`), false},
		{"pipeline leading dot", repl(`"w.daily"`, `".w"`), false},
		{"pipeline trailing dot", repl(`"w.daily"`, `"w.daily."`), false},
		{"missing bundle", repl(`"bundle":"/b",`, ``), false},
		{"empty bundle", repl(`"/b"`, `""`), false},
		{"digest upper hex", repl(digest, "sha256:"+strings.ToUpper(digest[7:])), false},
		{"digest no prefix", repl(digest, digest[7:]), false},
		{"digest short", repl(digest, digest[:70]), false},
		{"destination with dot", field(`"destinations":["a.b"]`), false},
		{"destination empty", field(`"destinations":[""]`), false},
		{"destination underscore", field(`"destinations":["_"]`), false},
		{"destination twice", field(`"destinations":["a","a"]`), false},
		{"bad produced_at", field(`"produced_at":"yesterday"`), false},
		{"date-only produced_at", field(`"produced_at":"2026-06-19"`), false},
		{"string take_ownership", field(`"take_ownership":"yes"`), false},
		{"rollback_of with space", field(`"allow_older":true,"rollback_of":"e 0"`), false},
	}
	for _, c := range cases {
		_, decErr := events.DecodeBundleReady([]byte(c.in))
		schemaErr := s.Validate(t, "bundle-ready.json#/$defs/admin", []byte(c.in))
		if (decErr == nil) != c.valid || (schemaErr == nil) != c.valid {
			t.Errorf("%s: decoder error %v, schema error %v; want valid = %v", c.name, decErr, schemaErr, c.valid)
		}
	}
}

// TestAnnouncedEventsMatchSchema: what AnnounceBundle and AnnounceAsOperator
// store in the bundle stream matches bundle-ready.json (the producer form)
// and its admin variant; operator flags fail the producer form.
func TestAnnouncedEventsMatchSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := schematest.New(t)
	js := testenv.NewNATS(t).JetStream(t)
	subjects := events.Subjects{}
	streams, err := events.Setup(ctx, js, events.SetupConfig{Subjects: subjects})
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, subjects)
	ev := events.BundleReady{PipelineID: "weatherreporter.daily", Bundle: "s3://bundles/run-1/", ManifestDigest: digest,
		Destinations: []string{"latest-html"}}
	seq, _, err := pub.AnnounceBundle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.TakeOwnership, ev.AllowOlder, ev.ReplayOf, ev.RollbackOf = true, true, "e1.latest-html.collision", "e0.latest-html"
	adminSeq, _, err := pub.AnnounceAsOperator(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(seq uint64) []byte {
		m, err := streams.Bundles.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var e events.BundleReady
		if e, err = events.DecodeBundleReady(m.Data); err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get("Nats-Msg-Id"); id != e.ID {
			t.Errorf("Nats-Msg-Id %q, want the event id %q", id, e.ID)
		}
		return m.Data
	}
	producer, admin := stored(seq), stored(adminSeq)
	for _, c := range []struct {
		name, schema string
		data         []byte
		valid        bool
	}{
		{"producer event", "bundle-ready.json", producer, true},
		{"producer event", "bundle-ready.json#/$defs/admin", producer, true},
		{"operator event", "bundle-ready.json#/$defs/admin", admin, true},
		{"operator event", "bundle-ready.json", admin, false},
		{"producer event with take_ownership false", "bundle-ready.json", []byte(strings.Replace(string(producer), `"bundle"`, `"take_ownership":false,"allow_older":false,"bundle"`, 1)), true},
	} {
		if err := s.Validate(t, c.schema, c.data); (err == nil) != c.valid {
			t.Errorf("%s against %s: %v, want valid = %v\n%s", c.name, c.schema, err, c.valid, c.data)
		}
	}
}
