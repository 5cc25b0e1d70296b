package catalog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/testenv"
)

const (
	digestA = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

// seedExample is the reference example document (testenv.SeedExample),
// built in Go.
func seedExample(t testing.TB) *catalog.Catalog {
	return &catalog.Catalog{
		DistributorVersion: "dev",
		CreatedAt:          mustTime(t, "2026-06-19T12:00:00Z"),
		UpdatedAt:          mustTime(t, "2026-06-19T12:05:00Z"),
		Outputs: []catalog.Output{{
			Path:          "tomorrow/index.html",
			PipelineID:    "weatherreporter.daily",
			DestinationID: "latest-html",
			Source: catalog.Source{
				ID:      "weatherreporter.tomorrow",
				Digest:  digestA,
				Created: mustTime(t, "2026-06-19T12:00:00Z"),
			},
			Kind:       catalog.KindGenerated,
			SourcePath: "report.md",
			Transform:  "markdown_to_html",
			SHA256:     digestB,
			Size:       12345,
			CreatedAt:  mustTime(t, "2026-06-19T12:00:00Z"),
			UpdatedAt:  mustTime(t, "2026-06-19T12:05:00Z"),
			URL:        "https://reports.example.com/weather/tomorrow/",
		}},
	}
}

// normalize makes two catalogs that mean the same compare equal with
// reflect.DeepEqual: UTC times without monotonic readings, outputs sorted,
// nil and empty output lists alike.
func normalize(c *catalog.Catalog) *catalog.Catalog {
	if c == nil {
		return nil
	}
	// Fields only: a catalog read by ParseOwned also holds its bytes.
	n := catalog.Catalog{DistributorVersion: c.DistributorVersion}
	u := func(t time.Time) time.Time { return t.UTC().Round(0) }
	n.CreatedAt, n.UpdatedAt = u(c.CreatedAt), u(c.UpdatedAt)
	n.Outputs = make([]catalog.Output, 0, len(c.Outputs))
	for _, o := range c.Outputs {
		o.Source.Created, o.CreatedAt, o.UpdatedAt = u(o.Source.Created), u(o.CreatedAt), u(o.UpdatedAt)
		n.Outputs = append(n.Outputs, o)
	}
	n.Sort()
	return &n
}

// tester is what both *testing.T and *rapid.T offer.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

func assertSameCatalog(t tester, got, want *catalog.Catalog) {
	t.Helper()
	if g, w := normalize(got), normalize(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("catalogs differ:\n got %+v\nwant %+v", g, w)
	}
}

func TestParseValidV4SeedExample(t *testing.T) {
	t.Parallel()
	cat, legacy, err := catalog.Parse(testenv.CatalogFixture(t, testenv.SeedExample))
	if err != nil || legacy {
		t.Fatalf("Parse = legacy %v, err %v; want a valid v4 catalog", legacy, err)
	}
	assertSameCatalog(t, cat, seedExample(t))
}

func TestParseAcceptsOffsetTimesAsUTC(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(string(testenv.CatalogFixture(t, testenv.SeedExample)),
		`"created_at": "2026-06-19T12:00:00Z"`, `"created_at": "2026-06-19T14:00:00.5+02:00"`, 1)
	cat, _, err := catalog.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := mustTime(t, "2026-06-19T12:00:00.5Z"); !cat.CreatedAt.Equal(want) || cat.CreatedAt.Location() != time.UTC {
		t.Fatalf("created_at = %v, want %v in UTC", cat.CreatedAt, want)
	}
}

func TestParseSortsOutputsByPath(t *testing.T) {
	t.Parallel()
	doc := seedDoc(t)
	first := doc["outputs"].([]any)[0].(map[string]any)
	second := cloneMap(first)
	second["path"] = "a/first.html"
	doc["outputs"] = []any{first, second}
	cat, _, err := catalog.Parse(encode(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{cat.Outputs[0].Path, cat.Outputs[1].Path}; !reflect.DeepEqual(got, []string{"a/first.html", "tomorrow/index.html"}) {
		t.Fatalf("paths = %q, want sorted", got)
	}
}

// Only versions that existed (1-3) are legacy state, which a replacement run
// may clear; 0 or a negative number is damage: invalid, never overwritten.
func TestParseNonexistentVersionIsInvalid(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`{"schema_version": 0, "whatever": [1, 2]}`, `{"schema_version": -3}`} {
		if _, legacy, err := catalog.Parse([]byte(data)); legacy || !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("Parse(%s) = legacy %v, %v; want ErrInvalid", data, legacy, err)
		}
	}
}

func TestParseLegacy(t *testing.T) {
	t.Parallel()
	cases := map[string][]byte{
		"seed history v2 single_owner": testenv.CatalogFixture(t, testenv.LegacyV2SingleOwner),
		"seed history v3 shared_root":  testenv.CatalogFixture(t, testenv.LegacyV3SharedRoot),
		"v1 bare":                      []byte(`{"schema_version": 1}`),
		"v3 with v4-looking junk":      []byte(`{"schema_version": 3, "outputs": "not a list", "state": {"mode": "catalog"}}`),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			cat, legacy, err := catalog.Parse(data)
			if err != nil || !legacy || cat != nil {
				t.Fatalf("Parse = (%v, %v, %v), want (nil, true, nil)", cat, legacy, err)
			}
		})
	}
}

func TestParseNewer(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"5", "6", "100"} {
		t.Run(v, func(t *testing.T) {
			// A newer document may have any shape: the version alone decides.
			cat, legacy, err := catalog.Parse([]byte(`{"schema_version": ` + v + `, "outputs": {"new": "shape"}}`))
			if !errors.Is(err, catalog.ErrNewer) || errors.Is(err, catalog.ErrInvalid) || cat != nil || legacy {
				t.Fatalf("Parse = (%v, %v, %v), want ErrNewer only", cat, legacy, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "schema_version "+v) || !strings.Contains(msg, "upgrade distributor") {
				t.Fatalf("error %q should name the version and the fix", msg)
			}
		})
	}
}

// seedDoc is the seed example as generic JSON, for mutation.
func seedDoc(t testing.TB) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(testenv.CatalogFixture(t, testenv.SeedExample)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func cloneMap(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&c)
	return c
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func out0(doc map[string]any) map[string]any { return doc["outputs"].([]any)[0].(map[string]any) }
func src0(doc map[string]any) map[string]any { return out0(doc)["source"].(map[string]any) }

type mutation func(doc map[string]any)

// invalidCase is a change to the seed example that Parse must reject; want
// is a fragment of the error naming the rule.
type invalidCase struct {
	name   string
	mutate mutation
	want   string
}

// invalidCases are shared with schema_test.go: docs/schema/catalog-v4.json
// must reject them too.
func invalidCases() []invalidCase {
	set := func(get func(map[string]any) map[string]any, key string, v any) mutation {
		return func(doc map[string]any) { get(doc)[key] = v }
	}
	del := func(get func(map[string]any) map[string]any, key string) mutation {
		return func(doc map[string]any) { delete(get(doc), key) }
	}
	top := func(doc map[string]any) map[string]any { return doc }
	state := func(doc map[string]any) map[string]any { return doc["state"].(map[string]any) }
	both := func(ms ...mutation) mutation {
		return func(doc map[string]any) {
			for _, m := range ms {
				m(doc)
			}
		}
	}

	return []invalidCase{
		// required top-level fields
		{"missing schema_version", del(top, "schema_version"), "schema_version is missing"},
		{"null schema_version", set(top, "schema_version", nil), "schema_version is missing"},
		{"string schema_version 4", set(top, "schema_version", "4"), "schema_version"},
		{"string schema_version 2 is not legacy", set(top, "schema_version", "2"), "schema_version"},
		{"fractional schema_version", set(top, "schema_version", json.Number("4.5")), "not an integer"},
		{"bool schema_version", set(top, "schema_version", true), "not an integer"},
		{"missing created_at", del(top, "created_at"), "created_at is required"},
		{"missing updated_at", del(top, "updated_at"), "updated_at is required"},
		{"missing state", del(top, "state"), "state.mode is required"},
		{"missing state.mode", del(state, "mode"), "state.mode is required"},
		{"missing outputs", del(top, "outputs"), "outputs is required"},
		{"null outputs", set(top, "outputs", nil), "outputs is required"},
		{"outputs not a list", set(top, "outputs", map[string]any{}), "outputs"},
		// required output fields
		{"missing output path", del(out0, "path"), "path is required"},
		{"missing output pipeline_id", del(out0, "pipeline_id"), "pipeline_id is required"},
		{"missing output destination_id", del(out0, "destination_id"), "destination_id is required"},
		{"missing output source", del(out0, "source"), "source with id, digest and created is required"},
		{"missing output source.id", del(src0, "id"), "source with id, digest and created is required"},
		{"missing output source.digest", del(src0, "digest"), "source with id, digest and created is required"},
		{"missing output source.created", del(src0, "created"), "source with id, digest and created is required"},
		{"missing output kind", del(out0, "kind"), "kind is required"},
		{"missing output sha256", del(out0, "sha256"), "sha256 is required"},
		{"missing output size", del(out0, "size"), "size is required"},
		{"missing output created_at", del(out0, "created_at"), "created_at and updated_at are required"},
		{"missing output updated_at", del(out0, "updated_at"), "created_at and updated_at are required"},
		{"empty pipeline_id", set(out0, "pipeline_id", ""), "pipeline_id is required"},
		{"empty destination_id", set(out0, "destination_id", ""), "destination_id is required"},
		{"empty source.id", set(src0, "id", ""), "source.id is required"},
		{"empty kind", set(out0, "kind", ""), "kind must be"},
		{"unknown kind", set(out0, "kind", "copy"), `not "copy"`},
		// paths
		{"duplicate path", func(doc map[string]any) {
			o := out0(doc)
			doc["outputs"] = []any{o, cloneMap(o)}
		}, "duplicate path"},
		{"empty path", set(out0, "path", ""), "empty"},
		{"absolute path", set(out0, "path", "/etc/passwd"), "absolute"},
		{"dotdot path", set(out0, "path", "../outside"), `".." segment`},
		{"inner dotdot path", set(out0, "path", "a/../../b"), `".." segment`},
		{"dot segment", set(out0, "path", "a/./b"), `"." segment`},
		{"empty segment", set(out0, "path", "a//b"), "empty segment"},
		{"trailing slash", set(out0, "path", "a/"), "empty segment"},
		{"backslash path", set(out0, "path", `a\b`), `contains '\'`},
		{"control char path", set(out0, "path", "a\x01b"), "control character"},
		{"NUL path", set(out0, "path", "a\x00b"), "control character"},
		{"DEL path", set(out0, "path", "a\x7fb"), "control character"},
		{"C1 control path", set(out0, "path", "a\u0085b"), "control character"},
		{"too long path", set(out0, "path", strings.Repeat("a", catalog.MaxPathLen+1)), "longer than 1024 bytes"},
		{"reserved catalog path", set(out0, "path", ".distributor.json"), "reserved"},
		{"reserved catalog path other case", set(out0, "path", ".Distributor.JSON"), "reserved"},
		{"under catalog path", set(out0, "path", ".distributor.json/x"), "reserved"},
		{"reserved dir", set(out0, "path", ".distributor"), "reserved"},
		{"under reserved dir", set(out0, "path", ".distributor/x"), "reserved"},
		{"bad generated source_path", set(out0, "source_path", "../report.md"), "source_path"},
		// kind-specific optional fields
		{"source output carrying source_path and transform", set(out0, "kind", "source"), "a source output carries no source_path or transform"},
		{"source output carrying source_path", both(set(out0, "kind", "source"), del(out0, "transform")), "a source output carries no source_path or transform"},
		{"source output carrying transform", both(set(out0, "kind", "source"), del(out0, "source_path")), "a source output carries no source_path or transform"},
		{"generated output lacking source_path", del(out0, "source_path"), "a generated output needs source_path and transform"},
		{"generated output lacking transform", del(out0, "transform"), "a generated output needs source_path and transform"},
		// unknown fields, including everything the seed keeps out of the top level
		{"top-level pipeline_id", set(top, "pipeline_id", "p"), `unknown field "pipeline_id"`},
		{"top-level destination_id", set(top, "destination_id", "d"), `unknown field "destination_id"`},
		{"top-level published_at", set(top, "published_at", "2026-06-19T12:00:00Z"), `unknown field "published_at"`},
		{"top-level workflow", set(top, "workflow", "additive"), `unknown field "workflow"`},
		{"top-level owners", set(top, "owners", []any{}), `unknown field "owners"`},
		{"top-level sources", set(top, "sources", []any{}), `unknown field "sources"`},
		{"top-level manifest", set(top, "manifest", map[string]any{}), `unknown field "manifest"`},
		{"unknown state field", set(state, "reconciliation", "mirror"), `unknown field "reconciliation"`},
		{"unknown output field", set(out0, "history", []any{}), `unknown field "history"`},
		{"unknown source field", set(src0, "files", []any{}), `unknown field "files"`},
		// digests
		{"uppercase sha256", set(out0, "sha256", strings.ToUpper(digestB)), "sha256 must be"},
		{"sha256 without prefix", set(out0, "sha256", strings.TrimPrefix(digestB, "sha256:")), "sha256 must be"},
		{"short sha256", set(out0, "sha256", digestB[:len(digestB)-1]), "sha256 must be"},
		{"sha512 digest", set(out0, "sha256", "sha512:"+strings.Repeat("ab", 64)), "sha256 must be"},
		{"bad source.digest", set(src0, "digest", "sha256:xyz"), "source.digest must be"},
		// times
		{"date-only created_at", set(top, "created_at", "2026-06-19"), `created_at "2026-06-19" is not an RFC3339 time`},
		{"space-separated updated_at", set(top, "updated_at", "2026-06-19 12:05:00Z"), "updated_at"},
		{"created_at without zone", set(top, "created_at", "2026-06-19T12:00:00"), "created_at"},
		{"numeric created_at", set(top, "created_at", 1750334400), "created_at"},
		{"bad output created_at", set(out0, "created_at", "yesterday"), `created_at "yesterday" is not an RFC3339 time`},
		{"bad output updated_at", set(out0, "updated_at", "2026-13-01T00:00:00Z"), "updated_at"},
		{"bad source.created", set(src0, "created", "2026-06-19T25:00:00Z"), "source.created"},
		{"zero output created_at", set(out0, "created_at", "0001-01-01T00:00:00Z"), "created_at and updated_at are required"},
		{"zero top created_at", set(top, "created_at", "0001-01-01T00:00:00Z"), "created_at and updated_at are required"},
		{"year -1 in UTC", set(src0, "created", "0000-01-01T00:00:00+01:00"), "outside years 0000-9999"},
		{"year 10000 in UTC", set(top, "updated_at", "9999-12-31T23:00:00-05:00"), "outside years 0000-9999"},
		// state.mode
		{"state.mode single_owner", set(state, "mode", "single_owner"), `state.mode is "single_owner"`},
		{"state.mode shared_root", set(state, "mode", "shared_root"), `state.mode is "shared_root"`},
		{"state.mode empty", set(state, "mode", ""), `state.mode is ""`},
		{"state.mode case", set(state, "mode", "Catalog"), `state.mode is "Catalog"`},
		// present-but-empty optional strings
		{"empty distributor_version", set(top, "distributor_version", ""), "distributor_version is empty"},
		{"empty source_path", set(out0, "source_path", ""), "source_path is empty"},
		{"empty transform", set(out0, "transform", ""), "transform is empty"},
		{"empty url", set(out0, "url", ""), "url is empty"},
		// sizes and types
		{"negative size", set(out0, "size", -1), "size must not be negative"},
		{"fractional size", set(out0, "size", json.Number("1.5")), "size"},
		{"string size", set(out0, "size", "5"), "size"},
		{"numeric path", set(out0, "path", 5), "path"},
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range invalidCases() {
		t.Run(tc.name, func(t *testing.T) {
			doc := seedDoc(t)
			tc.mutate(doc)
			assertInvalid(t, encode(t, doc), tc.want)
		})
	}
}

func TestParseInvalidJSON(t *testing.T) {
	t.Parallel()
	valid := string(testenv.CatalogFixture(t, testenv.SeedExample))
	cases := map[string]string{
		"empty":              "",
		"truncated":          valid[:len(valid)/2],
		"array":              "[]",
		"null":               "null",
		"number":             "4",
		"string":             `"catalog"`,
		"two objects":        valid + valid,
		"trailing garbage":   valid + "x",
		"trailing brace":     valid + "}",
		"comment":            "// catalog\n" + valid,
		"single quotes":      "{'schema_version': 4}",
		"trailing comma":     strings.Replace(valid, `"mode": "catalog"`, `"mode": "catalog",`, 1),
		"unquoted key":       strings.Replace(valid, `"kind"`, `kind`, 1),
		"schema in a string": `"{\"schema_version\": 4}"`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) { assertInvalid(t, []byte(data), "invalid catalog") })
	}
}

// A key repeated in one object, at any level, makes the catalog invalid:
// encoding/json would keep the last one, so "schema_version": 4,
// "schema_version": 3 would otherwise read as legacy state.
func TestParseDuplicateKeys(t *testing.T) {
	t.Parallel()
	valid := string(testenv.CatalogFixture(t, testenv.SeedExample))
	const fix = ": a key may appear once per object; fix the file by hand (which value is meant cannot be guessed)"
	for _, tc := range []struct {
		name, old, new string
		want           string
	}{
		{"top-level schema_version", `"schema_version": 4,`, `"schema_version": 4, "schema_version": 3,`,
			`invalid catalog: duplicate key "schema_version"` + fix},
		{"top-level legacy first", `"schema_version": 4,`, `"schema_version": 3, "schema_version": 4,`,
			`invalid catalog: duplicate key "schema_version"` + fix},
		{"top-level same value", `"updated_at": "2026-06-19T12:05:00Z",` + "\n  \"state\"",
			`"updated_at": "2026-06-19T12:05:00Z", "updated_at": "2026-06-19T12:05:00Z",` + "\n  \"state\"",
			`invalid catalog: duplicate key "updated_at"` + fix},
		{"output record", `"kind": "generated",`, `"kind": "source", "kind": "generated",`,
			`invalid catalog: duplicate key "kind" in outputs[0]` + fix},
		{"output record other case", `"size": 12345,`, `"size": 12345, "Size": 1,`,
			`invalid catalog: duplicate key "Size" in outputs[0]` + fix},
		{"source", `"id": "weatherreporter.tomorrow",`, `"id": "weatherreporter.tomorrow", "id": "x",`,
			`invalid catalog: duplicate key "id" in outputs[0].source` + fix},
		{"state", `"mode": "catalog"`, `"mode": "single_owner", "mode": "catalog"`,
			`invalid catalog: duplicate key "mode" in state` + fix},
		{"escaped", `"transform": "markdown_to_html",`, `"transform": "markdown_to_html", "\u0074ransform": "x",`,
			`invalid catalog: duplicate key "transform" in outputs[0]` + fix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(valid, tc.old) != 1 {
				t.Fatalf("%q is not once in the seed example", tc.old)
			}
			data := []byte(strings.Replace(valid, tc.old, tc.new, 1))
			cat, legacy, err := catalog.Parse(data)
			if !errors.Is(err, catalog.ErrInvalid) || cat != nil || legacy || err.Error() != tc.want {
				t.Fatalf("Parse = (%v, %v, %v)\nwant ErrInvalid %q", cat, legacy, err, tc.want)
			}
		})
	}
	// Legacy state with a repeated key is damage too, not clearable state.
	assertInvalid(t, []byte(`{"schema_version": 3, "schema_version": 3}`), `duplicate key "schema_version"`)
	// The same key in different objects is fine.
	if _, _, err := catalog.Parse([]byte(valid)); err != nil {
		t.Fatalf("seed example: %v", err)
	}
}

func assertInvalid(t *testing.T, data []byte, want string) {
	t.Helper()
	cat, legacy, err := catalog.Parse(data)
	if !errors.Is(err, catalog.ErrInvalid) || errors.Is(err, catalog.ErrNewer) || cat != nil || legacy {
		t.Fatalf("Parse = (%v, %v, %v), want ErrInvalid only\ninput: %s", cat, legacy, err, data)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Fatalf("error %q does not name the rule (want %q)", msg, want)
	}
	if strings.Count(msg, catalog.ErrInvalid.Error()) != 1 || strings.Contains(msg, "\n") {
		t.Fatalf("error %q should be one line that says %q once", msg, catalog.ErrInvalid)
	}
}

func TestParseInvalidPathWrapsErrBadPath(t *testing.T) {
	t.Parallel()
	doc := seedDoc(t)
	out0(doc)["path"] = "../x"
	_, _, err := catalog.Parse(encode(t, doc))
	if !errors.Is(err, catalog.ErrInvalid) || !errors.Is(err, catalog.ErrBadPath) {
		t.Fatalf("err = %v, want ErrInvalid and ErrBadPath", err)
	}
}

func TestMarshalGoldenSeedExample(t *testing.T) {
	t.Parallel()
	golden := testenv.CatalogFixture(t, testenv.SeedExample)
	got, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Fatalf("Marshal(seed example) differs from the seed example:\n%s", got)
	}
	parsed, _, err := catalog.Parse(golden)
	if err != nil {
		t.Fatal(err)
	}
	again, err := catalog.Marshal(parsed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, golden) {
		t.Fatalf("Parse+Marshal of the seed example is not byte-identical:\n%s", again)
	}
}

func TestMarshalShape(t *testing.T) {
	t.Parallel()
	east := time.FixedZone("east", 2*3600)
	c := &catalog.Catalog{
		CreatedAt: time.Date(2026, 6, 19, 14, 0, 0, 0, east),
		UpdatedAt: time.Date(2026, 6, 19, 12, 5, 0, 500, time.UTC),
		Outputs: []catalog.Output{
			{
				Path: "z/report.md", PipelineID: "weatherreporter.daily", DestinationID: "latest-html",
				Source: catalog.Source{ID: "weatherreporter.tomorrow", Digest: digestA, Created: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)},
				Kind:   catalog.KindSource, SHA256: digestB, Size: 0,
				CreatedAt: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC),
			},
			{
				Path: "a/<b>&c.html", PipelineID: "p", DestinationID: "d",
				Source: catalog.Source{ID: "s", Digest: digestA, Created: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)},
				Kind:   catalog.KindSource, SHA256: digestA, Size: 7, URL: "https://x.example/?a=1&b=<2>",
				CreatedAt: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC),
			},
		},
	}
	before := append([]catalog.Output(nil), c.Outputs...)
	got, err := catalog.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "schema_version": 4,
  "created_at": "2026-06-19T12:00:00Z",
  "updated_at": "2026-06-19T12:05:00.0000005Z",
  "state": {
    "mode": "catalog"
  },
  "outputs": [
    {
      "path": "a/<b>&c.html",
      "pipeline_id": "p",
      "destination_id": "d",
      "source": {
        "id": "s",
        "digest": "` + digestA + `",
        "created": "2026-06-19T12:00:00Z"
      },
      "kind": "source",
      "sha256": "` + digestA + `",
      "size": 7,
      "created_at": "2026-06-19T12:00:00Z",
      "updated_at": "2026-06-19T12:00:00Z",
      "url": "https://x.example/?a=1&b=<2>"
    },
    {
      "path": "z/report.md",
      "pipeline_id": "weatherreporter.daily",
      "destination_id": "latest-html",
      "source": {
        "id": "weatherreporter.tomorrow",
        "digest": "` + digestA + `",
        "created": "2026-06-19T12:00:00Z"
      },
      "kind": "source",
      "sha256": "` + digestB + `",
      "size": 0,
      "created_at": "2026-06-19T12:00:00Z",
      "updated_at": "2026-06-19T12:00:00Z"
    }
  ]
}
`
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	if !reflect.DeepEqual(c.Outputs, before) {
		t.Fatal("Marshal reordered the caller's outputs")
	}
}

func TestMarshalEmptyCatalog(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	got, err := catalog.Marshal(&catalog.Catalog{CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"schema_version\": 4,\n  \"created_at\": \"2026-06-19T12:00:00Z\",\n  \"updated_at\": \"2026-06-19T12:00:00Z\",\n" +
		"  \"state\": {\n    \"mode\": \"catalog\"\n  },\n  \"outputs\": []\n}\n"
	if string(got) != want {
		t.Fatalf("Marshal =\n%q\nwant\n%q", got, want)
	}
}

// TestCatalogTopLevelHasOnlySeedFields: no pipeline_id, destination_id,
// published_at, workflow, owners or sources at the top; owner ids stay two
// separate fields on each record.
func TestCatalogTopLevelHasOnlySeedFields(t *testing.T) {
	t.Parallel()
	got, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range doc {
		keys = append(keys, k)
	}
	want := []string{"created_at", "distributor_version", "outputs", "schema_version", "state", "updated_at"}
	if !sameSet(keys, want) {
		t.Fatalf("top-level keys = %q, want %q", keys, want)
	}
	var outs []map[string]json.RawMessage
	if err := json.Unmarshal(doc["outputs"], &outs); err != nil {
		t.Fatal(err)
	}
	if string(outs[0]["pipeline_id"]) != `"weatherreporter.daily"` || string(outs[0]["destination_id"]) != `"latest-html"` {
		t.Fatalf("owner fields = %s, %s", outs[0]["pipeline_id"], outs[0]["destination_id"])
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestMarshalRefusesWhatWouldNotReadBack(t *testing.T) {
	t.Parallel()
	cases := map[string]func(c *catalog.Catalog){
		"duplicate path":           func(c *catalog.Catalog) { c.Outputs = append(c.Outputs, c.Outputs[0]) },
		"zero created_at":          func(c *catalog.Catalog) { c.CreatedAt = time.Time{} },
		"zero record updated_at":   func(c *catalog.Catalog) { c.Outputs[0].UpdatedAt = time.Time{} },
		"year 10000":               func(c *catalog.Catalog) { c.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"negative year":            func(c *catalog.Catalog) { c.Outputs[0].Source.Created = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"reserved path":            func(c *catalog.Catalog) { c.Outputs[0].Path = ".distributor/lock" },
		"bad digest":               func(c *catalog.Catalog) { c.Outputs[0].SHA256 = "sha256:" },
		"invalid UTF-8 pipeline":   func(c *catalog.Catalog) { c.Outputs[0].PipelineID = "p\xff" },
		"invalid UTF-8 url":        func(c *catalog.Catalog) { c.Outputs[0].URL = "https://x/\xfe" },
		"invalid UTF-8 version":    func(c *catalog.Catalog) { c.DistributorVersion = "v\xff" },
		"invalid UTF-8 source id":  func(c *catalog.Catalog) { c.Outputs[0].Source.ID = "\xc3" },
		"source kind with extras":  func(c *catalog.Catalog) { c.Outputs[0].Kind = catalog.KindSource },
		"generated without source": func(c *catalog.Catalog) { c.Outputs[0].SourcePath = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := seedExample(t)
			mutate(c)
			if b, err := catalog.Marshal(c); !errors.Is(err, catalog.ErrInvalid) {
				t.Fatalf("Marshal = %s, %v; want ErrInvalid", b, err)
			}
		})
	}
}

func TestLookupAndIndex(t *testing.T) {
	t.Parallel()
	c := seedExample(t)
	second := c.Outputs[0]
	second.Path = "a.html"
	c.Outputs = append(c.Outputs, second)
	c.Sort()
	if o, ok := c.Lookup("tomorrow/index.html"); !ok || o.Path != "tomorrow/index.html" {
		t.Fatalf("Lookup(tomorrow/index.html) = %v, %v", o.Path, ok)
	}
	if o, ok := c.Lookup("a.html"); !ok || o.Path != "a.html" {
		t.Fatalf("Lookup(a.html) = %v, %v", o.Path, ok)
	}
	for _, p := range []string{"", "b", "zzz", "tomorrow"} {
		if _, ok := c.Lookup(p); ok {
			t.Fatalf("Lookup(%q) found a record", p)
		}
	}
	idx := c.Index()
	if len(idx) != 2 || idx["a.html"].Path != "a.html" {
		t.Fatalf("Index = %v", idx)
	}
	if got := (catalog.Owner{PipelineID: "p.q", DestinationID: "d"}).String(); got != "p.q/d" {
		t.Fatalf("Owner.String = %q", got)
	}
	if got := c.Outputs[0].Owner(); got != (catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"}) {
		t.Fatalf("Output.Owner = %v", got)
	}
}

func TestSameContent(t *testing.T) {
	t.Parallel()
	base := seedExample(t).Outputs[0]
	later := base
	later.CreatedAt = base.CreatedAt.Add(time.Hour)
	later.UpdatedAt = base.UpdatedAt.Add(time.Hour)
	if !base.SameContent(later) {
		t.Fatal("records differing only in timestamps must have the same content")
	}
	sameInstant := base
	sameInstant.Source.Created = base.Source.Created.In(time.FixedZone("x", 3600))
	if !base.SameContent(sameInstant) {
		t.Fatal("source.created in another zone is the same instant")
	}
	changes := map[string]func(o *catalog.Output){
		"path":           func(o *catalog.Output) { o.Path = "other" },
		"pipeline_id":    func(o *catalog.Output) { o.PipelineID = "other" },
		"destination_id": func(o *catalog.Output) { o.DestinationID = "other" },
		"source.id":      func(o *catalog.Output) { o.Source.ID = "other" },
		"source.digest":  func(o *catalog.Output) { o.Source.Digest = digestB },
		"source.created": func(o *catalog.Output) { o.Source.Created = o.Source.Created.Add(time.Second) },
		"kind":           func(o *catalog.Output) { o.Kind = catalog.KindSource },
		"source_path":    func(o *catalog.Output) { o.SourcePath = "other.md" },
		"transform":      func(o *catalog.Output) { o.Transform = "other" },
		"sha256":         func(o *catalog.Output) { o.SHA256 = digestA },
		"size":           func(o *catalog.Output) { o.Size++ },
		"url":            func(o *catalog.Output) { o.URL = "" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			o := base
			change(&o)
			if base.SameContent(o) || o.SameContent(base) {
				t.Fatalf("a change of %s must not count as the same content", name)
			}
		})
	}
}
