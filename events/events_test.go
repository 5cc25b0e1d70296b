package events_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv/schematest"
)

const digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

func sampleBundle() events.BundleReady {
	return events.BundleReady{
		SchemaVersion:  1,
		Type:           events.TypeBundleReady,
		ID:             "0197a3c1e2f04b9d2c7e5a11f03d6e88",
		PipelineID:     "weatherreporter.daily",
		Bundle:         "s3://bundles/weather/2026-06-19/",
		ManifestDigest: digest,
		ProducedAt:     time.Date(2026, 6, 19, 12, 0, 0, 123456789, time.UTC),
		Destinations:   []string{"latest-html", "weather-archive"},
		ReplayOf:       "0197a3c1e2f04b9d2c7e5a11f03d6e00",
	}
}

func TestBundleReadyRoundTrip(t *testing.T) {
	t.Parallel()
	ev := sampleBundle()
	data, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":1,"type":"bundle.ready","id":"0197a3c1e2f04b9d2c7e5a11f03d6e88","pipeline_id":"weatherreporter.daily","bundle":"s3://bundles/weather/2026-06-19/","manifest_digest":"` + digest + `","produced_at":"2026-06-19T12:00:00.123456789Z","destinations":["latest-html","weather-archive"],"replay_of":"0197a3c1e2f04b9d2c7e5a11f03d6e00"}`
	if string(data) != want {
		t.Fatalf("encoded\n got %s\nwant %s", data, want)
	}
	got, err := events.DecodeBundleReady(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, ev)
	}

	// Optional fields are left out, and their absence decodes.
	min := events.BundleReady{SchemaVersion: 1, Type: "bundle.ready", ID: "x", PipelineID: "p", Bundle: "/b", ManifestDigest: digest}
	data, _ = min.Encode()
	if want := `{"schema_version":1,"type":"bundle.ready","id":"x","pipeline_id":"p","bundle":"/b","manifest_digest":"` + digest + `"}`; string(data) != want {
		t.Fatalf("minimal encoded %s, want %s", data, want)
	}
	got, err = events.DecodeBundleReady(data)
	if err != nil || !reflect.DeepEqual(got, min) {
		t.Fatalf("minimal round trip: %+v, %v", got, err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	orig := sampleBundle()
	r := events.Result{
		SchemaVersion: 1,
		Type:          events.TypeFailed,
		ID:            "b1.latest-html.failed",
		Time:          time.Date(2026, 6, 19, 12, 1, 0, 0, time.UTC),
		BundleEventID: "b1",
		PipelineID:    "weatherreporter.daily",
		DestinationID: "latest-html",
		Source:        &events.SourceRef{ID: "weatherreporter.tomorrow", Digest: digest, Created: time.Date(2026, 6, 19, 11, 0, 0, 0, time.UTC)},
		Written:       2, Unchanged: 3, Deleted: 1,
		Outputs: []events.OutputRef{
			{Path: "tomorrow/index.html", SHA256: digest, Size: 42, URL: "https://r.example.com/tomorrow/", Action: events.ActionWritten},
			{Path: "old.html", Action: events.ActionDeleted},
		},
		OutputsTruncated: true,
		Collisions:       []string{"a.txt"},
		Adopted:          []string{"b.txt"},
		ListsTruncated:   true,
		Reason:           events.ReasonStorage,
		Message:          "write tomorrow/index.html: access denied",
		Attempts:         5,
		Original:         &orig,
		Removed:          4,
		SizeMismatches:   []string{"c.txt"},
	}
	data, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"schema_version":1`, `"bundle_event_id":"b1"`, `"destination_id":"latest-html"`, `"outputs_truncated":true`, `"lists_truncated":true`, `"size_mismatches":["c.txt"]`, `"original":{"schema_version":1`, `"action":"deleted"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("encoded result lacks %s: %s", key, data)
		}
	}
	got, err := events.DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, r)
	}

	// A minimal published event keeps the counts and drops empty extras.
	p := events.Result{SchemaVersion: 1, Type: events.TypePublished, ID: "x", Time: r.Time}
	data, _ = p.Encode()
	if want := `{"schema_version":1,"type":"published","id":"x","time":"2026-06-19T12:01:00Z","written":0,"unchanged":0,"deleted":0}`; string(data) != want {
		t.Fatalf("minimal result %s, want %s", data, want)
	}
}

func TestDecodeBundleReadyErrors(t *testing.T) {
	t.Parallel()
	valid := `{"schema_version":1,"type":"bundle.ready","id":"e1","pipeline_id":"w.daily","bundle":"/b","manifest_digest":"` + digest + `"}`
	if _, err := events.DecodeBundleReady([]byte(valid)); err != nil {
		t.Fatalf("valid event: %v", err)
	}
	repl := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("test bug: %q not in valid event", old)
		}
		return strings.Replace(valid, old, new, 1)
	}
	cases := []struct{ name, in, want string }{
		{"not json", `not json`, "invalid character"},
		{"array", `[]`, "cannot unmarshal array"},
		{"unknown field", repl(`"bundle"`, `"extra":1,"bundle"`), `unknown field "extra"`},
		{"wrong json type", repl(`"schema_version":1`, `"schema_version":"1"`), "cannot unmarshal string"},
		{"trailing data", valid + `{}`, "trailing data"},
		{"missing schema_version", repl(`"schema_version":1,`, ``), "schema_version 0 is not supported"},
		{"schema_version 2", repl(`"schema_version":1`, `"schema_version":2`), "schema_version 2 is not supported"},
		{"wrong type", repl(`"bundle.ready"`, `"published"`), `type is "published", want "bundle.ready"`},
		{"empty id", repl(`"e1"`, `""`), "id is empty"},
		{"id with space", repl(`"e1"`, `"e 1"`), "whitespace or control"},
		{"empty pipeline", repl(`"w.daily"`, `""`), "pipeline id is empty"},
		{"pipeline wildcard", repl(`"w.daily"`, `"w.*"`), `contains '*'`},
		{"pipeline gt", repl(`"w.daily"`, `"w.>"`), `contains '>'`},
		{"pipeline space", repl(`"w.daily"`, `"w daily"`), `contains ' '`},
		{"pipeline empty part", repl(`"w.daily"`, `"w..daily"`), "empty part"},
		{"pipeline trailing dot", repl(`"w.daily"`, `"w.daily."`), "empty part"},
		{"empty bundle", repl(`"/b"`, `""`), "bundle is empty"},
		{"digest prefix uppercase", repl(digest, "SHA256:"+digest[7:]), "not sha256:<64 lowercase hex>"},
		{"digest upper hex", repl(digest, "sha256:"+strings.ToUpper(digest[7:])), "not sha256:<64 lowercase hex>"},
		{"digest no prefix", repl(digest, digest[7:]), "not sha256:<64 lowercase hex>"},
		{"digest short", repl(digest, digest[:70]), "not sha256:<64 lowercase hex>"},
		{"digest md5", repl(digest, "md5:"+digest[7:]), "not sha256:<64 lowercase hex>"},
		{"destination with dot", repl(`"bundle"`, `"destinations":["a.b"],"bundle"`), `destination id "a.b" contains '.'`},
		{"destination empty", repl(`"bundle"`, `"destinations":[""],"bundle"`), "destination id is empty"},
		{"destination twice", repl(`"bundle"`, `"destinations":["a","a"],"bundle"`), `"a" is listed twice`},
		{"bad produced_at", repl(`"bundle"`, `"produced_at":"yesterday","bundle"`), "cannot parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := events.DecodeBundleReady([]byte(c.in))
			if !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// Rule: a bundle-ready event over a size limit is invalid, with a message
// naming the limit and the value; an event at the limit decodes. The
// schema states the same limits (maxLength, maxItems), but for the whole
// event's size and bytes beyond characters, which it cannot express.
func TestBundleReadyLimits(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	base := events.BundleReady{SchemaVersion: 1, Type: events.TypeBundleReady, ID: "e1", PipelineID: "w.daily", Bundle: "/b", ManifestDigest: digest}
	ids := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("d%0*d", size-1, i)
		}
		return out
	}
	// padded fills ReplayOf (which has no limit of its own) so that the
	// event encodes to exactly size bytes.
	padded := func(size int) events.BundleReady {
		ev := base
		ev.ReplayOf = "r"
		data, _ := ev.Encode()
		ev.ReplayOf = strings.Repeat("r", 1+size-len(data))
		return ev
	}
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	cases := []struct {
		name string
		edit func(*events.BundleReady)
		want string // "" for valid
		// bytesOnly: a limit the schema cannot express (the whole event's
		// size, bytes where maxLength counts characters).
		bytesOnly bool
	}{
		{"event at the size limit", func(e *events.BundleReady) { *e = padded(events.MaxEventBytes) }, "", false},
		{"event over the size limit", func(e *events.BundleReady) { *e = padded(events.MaxEventBytes + 1) },
			"invalid event: bundle.ready: the event is 65537 bytes, over the limit of 65536", true},
		{"600 KB bundle", func(e *events.BundleReady) { e.Bundle = long("/", 600<<10) },
			"invalid event: bundle.ready: the event is 614580 bytes, over the limit of 65536", false},
		{"bundle at the limit", func(e *events.BundleReady) { e.Bundle = long("/", 4096) }, "", false},
		{"bundle over the limit", func(e *events.BundleReady) { e.Bundle = long("/", 4097) },
			`invalid event: bundle.ready e1: bundle location "/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is 4097 bytes, over the limit of 4096`, false},
		{"bundle with a terminal escape", func(e *events.BundleReady) { e.Bundle = "/srv/b\x1b]0;owned\a/" },
			`invalid event: bundle.ready e1: bundle location "/srv/b\x1b]0;owned\a/" contains control characters, which are not allowed`, false},
		{"bundle with a C1 control", func(e *events.BundleReady) { e.Bundle = "s3://bk/a\u009bb/" },
			`invalid event: bundle.ready e1: bundle location "s3://bk/a\u009bb/" contains control characters, which are not allowed`, false},
		{"bundle with a space", func(e *events.BundleReady) { e.Bundle = "/srv/my bundles/b1" }, "", false},
		{"id at the limit", func(e *events.BundleReady) { e.ID = long("e", 512) }, "", false},
		{"id over the limit", func(e *events.BundleReady) { e.ID = long(strings.Repeat("i", 31)+"é", 513) },
			`invalid event: bundle.ready: id "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiii…" is 513 bytes, over the limit of 512`, true},
		{"id of 513 characters", func(e *events.BundleReady) { e.ID = long("e", 513) },
			`invalid event: bundle.ready: id "exxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is 513 bytes, over the limit of 512`, false},
		{"pipeline id at the limit", func(e *events.BundleReady) { e.PipelineID = long("p", 256) }, "", false},
		{"pipeline id over the limit", func(e *events.BundleReady) { e.PipelineID = long("p", 257) },
			`invalid event: bundle.ready e1: pipeline_id "pxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is 257 bytes, over the limit of 256`, false},
		{"destinations at the limit", func(e *events.BundleReady) { e.Destinations = ids(256, 4) }, "", false},
		{"destinations over the limit", func(e *events.BundleReady) { e.Destinations = ids(257, 4) },
			"invalid event: bundle.ready e1: 257 destinations, over the limit of 256", false},
		{"60,000 destinations", func(e *events.BundleReady) { e.Destinations = ids(60000, 6) },
			"invalid event: bundle.ready: the event is 540199 bytes, over the limit of 65536", false},
		{"destination id at the limit", func(e *events.BundleReady) { e.Destinations = []string{long("d", 256)} }, "", false},
		{"destination id over the limit", func(e *events.BundleReady) { e.Destinations = []string{"a", long("d", 257)} },
			`invalid event: bundle.ready e1: destinations: destination id "dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is 257 bytes, over the limit of 256`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := base
			c.edit(&ev)
			data, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			schemaErr := s.Validate(t, "bundle-ready.json", data)
			if accepts := c.want == "" || c.bytesOnly; (schemaErr == nil) != accepts {
				t.Errorf("bundle-ready.json: %v, want it to accept the event: %v", schemaErr, accepts)
			}
			_, err = events.DecodeBundleReady(data)
			if c.want == "" {
				if err != nil {
					t.Fatalf("%d-byte event: %v", len(data), err)
				}
				return
			}
			if !errors.Is(err, events.ErrInvalidEvent) || err.Error() != c.want {
				t.Fatalf("err = %v\nwant %s", err, c.want)
			}
		})
	}
}

func TestDecodeResultErrors(t *testing.T) {
	t.Parallel()
	valid := `{"schema_version":1,"type":"failed","id":"r1","time":"2026-06-19T12:00:00Z","reason":"storage","written":0,"unchanged":0,"deleted":0}`
	if _, err := events.DecodeResult([]byte(valid)); err != nil {
		t.Fatalf("valid result: %v", err)
	}
	cases := []struct{ name, in, want string }{
		{"unknown field", strings.Replace(valid, `"reason"`, `"colour":"red","reason"`, 1), `unknown field "colour"`},
		{"schema 3", strings.Replace(valid, `"schema_version":1`, `"schema_version":3`, 1), "schema_version 3"},
		{"unknown type", strings.Replace(valid, `"failed"`, `"exploded"`, 1), `type "exploded" is not one of`},
		{"bundle.ready type", strings.Replace(valid, `"failed"`, `"bundle.ready"`, 1), `type "bundle.ready" is not one of`},
		{"no id", strings.Replace(valid, `"r1"`, `""`, 1), "id is empty"},
		{"no time", strings.Replace(valid, `"time":"2026-06-19T12:00:00Z",`, ``, 1), "time is missing"},
		{"failed without reason", strings.Replace(valid, `"reason":"storage",`, ``, 1), "reason is empty"},
		{"bad original", strings.Replace(valid, `"reason"`, `"original":{"schema_version":1,"type":"bundle.ready","id":"e","pipeline_id":"p","bundle":"/b","manifest_digest":"sha256:x"},"reason"`, 1), "original: invalid event"},
		{"unknown field in original", strings.Replace(valid, `"reason"`, `"original":{"bogus":1},"reason"`, 1), `unknown field "bogus"`},
		{"original_ref without seq", strings.Replace(valid, `"reason"`, `"original_ref":{"stream":"S","seq":0},"reason"`, 1), `original_ref needs a stream and a sequence, got "S" and 0`},
		{"counts as strings", strings.Replace(valid, `"written":0`, `"written":"0"`, 1), "cannot unmarshal string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := events.DecodeResult([]byte(c.in))
			if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidEvent containing %q", err, c.want)
			}
		})
	}
}

// TestStreamNamesAreInjective: prefixes that differ only in case or in
// '-' against '_' get different stream and bucket names, and every name
// is one NATS accepts for a bucket (letters, digits, '_', '-').
func TestStreamNamesAreInjective(t *testing.T) {
	t.Parallel()
	var prefixes []string
	var build func(p string)
	build = func(p string) {
		if p != "" && !strings.HasPrefix(p, "-") && !strings.HasPrefix(p, "_") {
			prefixes = append(prefixes, p)
		}
		if len(p) == 4 {
			return
		}
		for _, c := range []string{"a", "A", "b", "1", "-", "_"} {
			build(p + c)
		}
	}
	build("")
	seen := map[string]string{}
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	for _, p := range prefixes {
		s := events.Subjects{Prefix: p}
		for _, name := range []string{s.BundlesStream(), s.EventsStream(), s.LeaseBucket()} {
			if other, ok := seen[name]; ok {
				t.Fatalf("prefixes %q and %q both name %s", other, p, name)
			}
			seen[name] = p
			if !valid.MatchString(name) {
				t.Fatalf("prefix %q names %q, not a valid bucket name", p, name)
			}
		}
	}
	if len(prefixes) < 1000 {
		t.Fatalf("only %d prefixes tried", len(prefixes))
	}
}

func TestSubjects(t *testing.T) {
	t.Parallel()
	var def events.Subjects // zero value: "distributor"
	acme := events.Subjects{Prefix: "acme-dist"}
	cases := []struct{ got, want string }{
		{def.BundleReady("weatherreporter.daily"), "distributor.bundle.ready.weatherreporter.daily"},
		{def.BundleReadyFilter(""), "distributor.bundle.ready.>"},
		{def.BundleReadyFilter("w.daily"), "distributor.bundle.ready.w.daily"},
		{def.AdminBundleReady("weatherreporter.daily"), "distributor.admin.bundle.ready.weatherreporter.daily"},
		{def.AdminBundleReadyFilter(""), "distributor.admin.bundle.ready.>"},
		{acme.AdminBundleReady("p"), "acme-dist.admin.bundle.ready.p"},
		{def.Result("published", "latest-html", "weatherreporter.daily"), "distributor.events.published.latest-html.weatherreporter.daily"},
		{def.Result("failed", "", "w.daily"), "distributor.events.failed._.w.daily"},
		{def.Result("failed", "", ""), "distributor.events.failed._._"},
		{def.ResultFilter("", "", ""), "distributor.events.*.*.>"},
		{def.ResultFilter("failed", "", ""), "distributor.events.failed.*.>"},
		{def.ResultFilter("", "latest-html", ""), "distributor.events.*.latest-html.>"},
		{def.ResultFilter("", "", "w.daily"), "distributor.events.*.*.w.daily"},
		{def.ResultFilter("collision", "archive", "w.daily"), "distributor.events.collision.archive.w.daily"},
		{def.BundlesStream(), "DISTRIBUTOR_BUNDLES"},
		{def.EventsStream(), "DISTRIBUTOR_EVENTS"},
		{def.LeaseBucket(), "DISTRIBUTOR_LEASES"},
		{def.Durable(), "distributor-publisher"},
		{acme.BundleReady("p"), "acme-dist.bundle.ready.p"},
		{acme.BundlesStream(), "ACME_DIST_BUNDLES"},
		{acme.EventsStream(), "ACME_DIST_EVENTS"},
		{acme.LeaseBucket(), "ACME_DIST_LEASES"},
		{acme.Durable(), "acme-dist-publisher"},

		// Capitals and '_' are what the folding loses: their names carry
		// a code of them.
		{events.Subjects{Prefix: "Acme"}.BundlesStream(), "ACME-8_BUNDLES"},
		{events.Subjects{Prefix: "acmE"}.EventsStream(), "ACME-1_EVENTS"},
		{events.Subjects{Prefix: "t_1"}.LeaseBucket(), "T_1-4_LEASES"},
		{events.Subjects{Prefix: "t-1"}.LeaseBucket(), "T_1_LEASES"},
		{events.Subjects{Prefix: "ab_cd-EF"}.BundlesStream(), "AB_CD_EF-23_BUNDLES"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
	}

	for _, p := range []string{"", "distributor", "Acme_2", "a-b"} {
		if _, err := events.NewSubjects(p); err != nil {
			t.Errorf("NewSubjects(%q): %v", p, err)
		}
	}
	for _, p := range []string{"a.b", "a b", "a*", "a>", "ä", "a/b"} {
		_, err := events.NewSubjects(p)
		if err == nil || !strings.Contains(err.Error(), "nats.subject_prefix") {
			t.Errorf("NewSubjects(%q): err = %v, want a nats.subject_prefix error", p, err)
		}
	}
}

// BundleReadyPipeline reads the pipeline back from both bundle-ready
// subjects of its prefix, and from nothing else.
func TestBundleReadyPipeline(t *testing.T) {
	t.Parallel()
	var def events.Subjects
	acme := events.Subjects{Prefix: "acme"}
	for _, c := range []struct {
		s       events.Subjects
		subject string
		want    string
		ok      bool
	}{
		{def, def.BundleReady("weatherreporter.daily"), "weatherreporter.daily", true},
		{def, def.AdminBundleReady("weatherreporter.daily"), "weatherreporter.daily", true},
		{def, def.BundleReady("admin.bundle.ready.x"), "admin.bundle.ready.x", true},
		{acme, acme.BundleReady("p"), "p", true},
		{acme, acme.AdminBundleReady("p.q"), "p.q", true},
		{acme, def.BundleReady("p"), "", false},
		{def, "distributor.bundle.ready.", "", false},
		{def, "distributor.bundle.ready", "", false},
		{def, "distributor.events.failed._.p", "", false},
		{def, "distributor.admin.bundle.ready.", "", false},
	} {
		got, ok := c.s.BundleReadyPipeline(c.subject)
		if got != c.want || ok != c.ok {
			t.Errorf("%+v.BundleReadyPipeline(%q) = %q, %v; want %q, %v", c.s, c.subject, got, ok, c.want, c.ok)
		}
	}
}

func TestValidateIDs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"weatherreporter.daily", "a", "a-b_c.d", "report/2"} {
		if err := events.ValidatePipelineID(id); err != nil {
			t.Errorf("ValidatePipelineID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "_", ".a", "a.", "a..b", "a b", "a\tb", "a*", "a.>", "a\x00"} {
		if err := events.ValidatePipelineID(id); err == nil {
			t.Errorf("ValidatePipelineID(%q) = nil, want error", id)
		}
	}
	for _, id := range []string{"latest-html", "weather_archive", "x1"} {
		if err := events.ValidateDestinationID(id); err != nil {
			t.Errorf("ValidateDestinationID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "_", "a.b", "a b", "*", ">"} {
		if err := events.ValidateDestinationID(id); err == nil {
			t.Errorf("ValidateDestinationID(%q) = nil, want error", id)
		}
	}
}

func TestNewEventID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := events.NewEventID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("NewEventID() = %q, want 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewEventID() repeated %q", id)
		}
		seen[id] = true
		if i%100 == 0 {
			if prev != "" && id[:12] < prev[:12] {
				t.Fatalf("time prefix went back: %s after %s", id, prev)
			}
			prev = id
		}
	}
	a := events.NewEventID()
	time.Sleep(2 * time.Millisecond)
	if b := events.NewEventID(); !(a < b) {
		t.Fatalf("ids do not sort by time: %s then %s", a, b)
	}
}

// A superseded result decodes, names the version that won, and gets the
// deterministic id that keeps a redelivery from reporting it twice.
func TestSupersededResult(t *testing.T) {
	t.Parallel()
	lost := &events.SourceRef{ID: "w", Digest: digest, Created: time.Date(2026, 6, 19, 11, 0, 0, 0, time.UTC)}
	won := &events.SourceRef{ID: "w", Digest: "sha256:" + strings.Repeat("f", 64), Created: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)}
	r := events.Result{SchemaVersion: 1, Type: events.TypeSuperseded, BundleEventID: "b1", DestinationID: "latest-html",
		PipelineID: "w.daily", Source: lost, SupersededBy: won, Time: time.Date(2026, 6, 19, 12, 1, 0, 0, time.UTC)}
	if got := events.ResultMsgID(r); got != "b1.latest-html" {
		t.Fatalf("ResultMsgID = %q", got)
	}
	r.ID = events.ResultMsgID(r)
	data, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.DecodeResult(data)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if !events.IsResultType(events.TypeSuperseded) {
		t.Fatal("superseded is not a result type")
	}
}

// TestOutputRefSize: an output with a digest always says its size, 0 for
// an empty file; a deleted path without a record says neither.
func TestOutputRefSize(t *testing.T) {
	t.Parallel()
	digest := "sha256:" + strings.Repeat("e", 64)
	for _, tc := range []struct {
		ref  events.OutputRef
		want string
	}{
		{events.OutputRef{Path: "empty.txt", SHA256: digest, Action: events.ActionWritten},
			`{"path":"empty.txt","sha256":"` + digest + `","size":0,"action":"written"}`},
		{events.OutputRef{Path: "a.csv", SHA256: digest, Size: 3, URL: "https://x/a.csv", Action: events.ActionUpdated},
			`{"path":"a.csv","sha256":"` + digest + `","size":3,"url":"https://x/a.csv","action":"updated"}`},
		{events.OutputRef{Path: "gone.csv", Action: events.ActionDeleted},
			`{"path":"gone.csv","action":"deleted"}`},
	} {
		got, err := json.Marshal(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		var back events.OutputRef
		if err := json.Unmarshal(got, &back); err != nil || back != tc.ref {
			t.Errorf("round trip of %s: %+v, %v", got, back, err)
		}
	}
}
