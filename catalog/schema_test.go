package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

const catalogSchema = "catalog-v4.json"

// TestCatalogSchemaFixtures: the v4 fixtures match docs/schema/catalog-v4.json;
// legacy ones (which Parse reads as legacy, not v4) do not.
func TestCatalogSchemaFixtures(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	for _, f := range testenv.CatalogFixtureNames(t) {
		data := testenv.CatalogFixture(t, f)
		cat, legacy, perr := catalog.Parse(data)
		serr := s.Validate(t, catalogSchema, data)
		switch {
		case perr == nil && !legacy && cat != nil:
			if serr != nil {
				t.Errorf("%s: a valid v4 catalog fails the schema: %v", f, serr)
			}
		case legacy:
			if serr == nil {
				t.Errorf("%s: legacy state passes the v4 schema", f)
			}
		default:
			t.Errorf("%s: Parse: %v", f, perr)
		}
	}
}

// beyondSchema are the Parse rules JSON Schema cannot state; docs/catalog.md
// and the schema's description list them.
var beyondSchema = map[string]bool{
	"duplicate path":         true, // unique by a property
	"zero output created_at": true, // the zero time is a valid RFC 3339 time
	"zero top created_at":    true,
	"year -1 in UTC":         true, // the range holds after conversion to UTC
	"year 10000 in UTC":      true,
}

// TestCatalogSchemaRejectsWhatParseRejects: every invalid document of
// TestParseInvalid fails the schema too, except the few rules above.
func TestCatalogSchemaRejectsWhatParseRejects(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	seen := map[string]bool{}
	for _, tc := range invalidCases() {
		doc := seedDoc(t)
		tc.mutate(doc)
		data := encode(t, doc)
		if _, _, err := catalog.Parse(data); err == nil {
			t.Fatalf("%s: Parse accepts it", tc.name)
		}
		err := s.Validate(t, catalogSchema, data)
		switch {
		case beyondSchema[tc.name]:
			seen[tc.name] = true
			if err != nil {
				t.Errorf("%s: listed as beyond the schema, but the schema rejects it (drop it from beyondSchema): %v", tc.name, err)
			}
		case err == nil:
			t.Errorf("%s: Parse rejects it (%s), the schema accepts it:\n%s", tc.name, tc.want, data)
		}
	}
	for name := range beyondSchema {
		if !seen[name] {
			t.Errorf("beyondSchema names %q, which is no case of invalidCases", name)
		}
	}
}

// TestCatalogSchemaAcceptsEveryMarshalledCatalog: whatever Marshal writes
// matches the schema.
func TestCatalogSchemaAcceptsEveryMarshalledCatalog(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	rapid.Check(t, func(rt *rapid.T) {
		c := catalogGen.Draw(rt, "catalog")
		b, err := catalog.Marshal(c)
		if err != nil {
			rt.Fatalf("Marshal: %v", err)
		}
		if err := s.Validate(t, catalogSchema, b); err != nil {
			rt.Fatalf("a marshalled catalog fails the schema: %v\n%s", err, b)
		}
	})
}

// TestOutputPathSchemaAgreesWithValidateOutputPath: the path pattern of
// docs/schema accepts exactly the paths ValidateOutputPath accepts.
func TestOutputPathSchemaAgreesWithValidateOutputPath(t *testing.T) {
	t.Parallel()
	s := schematest.New(t)
	const pathSchema = "defs.json#/$defs/output_path"
	s.Schema(t, pathSchema)
	pieces := rapid.SampledFrom([]string{"a", "Z", "0", "/", ".", "..", "...", "\\", " ", "\x00", "\x1f", "\x7f", "\u0085", "\u00a0", "\u2028",
		"é", "日", "😀", ".distributor", ".DISTRIBUTOR", ".diſtributor", ".json", ".Json", "-tmp-", "-TMP-", "x"})
	check := func(ft interface{ Fatalf(string, ...any) }, p string) {
		data, _ := json.Marshal(p)
		goErr := catalog.ValidateOutputPath(p)
		schemaErr := s.Validate(t, pathSchema, data)
		if (goErr == nil) != (schemaErr == nil) {
			ft.Fatalf("path %q: ValidateOutputPath %v, schema %v", p, goErr, schemaErr)
		}
	}
	for _, p := range []string{"report.md", "a/b/c.txt", ".distributor.json", ".distributor/lock", ".distributor-tmp-1", "a/.distributor-tmp-x",
		".distributor.jsonx", ".distributorx/y", "a/.distributor/x", ".diſtributor", ".DiſTRIBUTOR.JSON/x", "a/.diſtributor-Tmp-", strings.Repeat("a", 1024), strings.Repeat("a", 1025)} {
		check(t, p)
	}
	rapid.Check(t, func(rt *rapid.T) {
		check(rt, strings.Join(rapid.SliceOfN(pieces, 1, 6).Draw(rt, "pieces"), ""))
	})
}
