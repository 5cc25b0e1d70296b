package catalog_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

var (
	segmentGen = rapid.OneOf(
		rapid.StringMatching(`[a-zA-Z0-9_ -][a-zA-Z0-9._ -]{0,8}`),
		rapid.SampledFrom([]string{"...", ".hidden", "a..b", "ünï", "日本語", "with space", `quote"d`, "<b>&c", "emoji😀", "\u2028"}),
	)
	pathGen = rapid.Custom(func(t *rapid.T) string {
		segs := rapid.SliceOfN(segmentGen, 1, 3).Draw(t, "segments")
		return strings.Join(segs, "/")
	}).Filter(func(p string) bool { return catalog.ValidateOutputPath(p) == nil })
	digestGen = rapid.Custom(func(t *rapid.T) string {
		return "sha256:" + hex.EncodeToString(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "digest"))
	})
	// Any instant RFC3339 can write in UTC, shown in any zone, never the zero time.
	timeGen = rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()).Draw(t, "sec")
		nsec := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 999_999_999)).Draw(t, "nsec")
		zone := time.FixedZone("z", rapid.IntRange(-14*60, 14*60).Draw(t, "offset-minutes")*60)
		return time.Unix(sec, nsec).In(zone)
	})
	// Any valid UTF-8, control characters included: JSON escapes them.
	idGen = rapid.StringN(1, 12, -1)
)

func outputGen(path string) *rapid.Generator[catalog.Output] {
	return rapid.Custom(func(t *rapid.T) catalog.Output {
		o := catalog.Output{
			Path:          path,
			PipelineID:    idGen.Draw(t, "pipeline"),
			DestinationID: idGen.Draw(t, "destination"),
			Source:        catalog.Source{ID: idGen.Draw(t, "source-id"), Digest: digestGen.Draw(t, "source-digest"), Created: timeGen.Draw(t, "source-created")},
			Kind:          catalog.KindSource,
			SHA256:        digestGen.Draw(t, "sha256"),
			Size:          rapid.Int64Min(0).Draw(t, "size"),
			CreatedAt:     timeGen.Draw(t, "created"),
			UpdatedAt:     timeGen.Draw(t, "updated"),
		}
		if rapid.Bool().Draw(t, "generated") {
			o.Kind = catalog.KindGenerated
			o.SourcePath = pathGen.Draw(t, "source-path")
			o.Transform = idGen.Draw(t, "transform")
		}
		if rapid.Bool().Draw(t, "has-url") {
			o.URL = idGen.Draw(t, "url")
		}
		return o
	})
}

var catalogGen = rapid.Custom(func(t *rapid.T) *catalog.Catalog {
	c := &catalog.Catalog{CreatedAt: timeGen.Draw(t, "created"), UpdatedAt: timeGen.Draw(t, "updated")}
	if rapid.Bool().Draw(t, "has-version") {
		c.DistributorVersion = idGen.Draw(t, "version")
	}
	for _, p := range rapid.SliceOfNDistinct(pathGen, 0, 8, rapid.ID[string]).Draw(t, "paths") {
		c.Outputs = append(c.Outputs, outputGen(p).Draw(t, "output"))
	}
	return c
})

// TestRoundTripProperty: any valid catalog → Marshal → Parse → the same
// catalog, and Marshal does not depend on the order of the outputs.
func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		b, err := catalog.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if !bytes.HasSuffix(b, []byte("}\n")) {
			t.Fatalf("no trailing newline: %q", b)
		}
		got, legacy, err := catalog.Parse(b)
		if err != nil || legacy {
			t.Fatalf("Parse(Marshal(c)) = legacy %v, %v\n%s", legacy, err, b)
		}
		assertSameCatalog(t, got, c)

		shuffled := *c
		shuffled.Outputs = rapid.Permutation(c.Outputs).Draw(t, "order")
		b2, err := catalog.Marshal(&shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("Marshal depends on output order:\n%s\n%s", b, b2)
		}
	})
}

// FuzzParse: Parse never panics, classifies every input exactly one way, and
// whatever it accepts re-marshals to a document that parses back equal.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `{"schema_version":4}`, `{"schema_version":5}`, `{"schema_version":"3"}`,
		`{"schema_version":4,"created_at":"2026-06-19T12:00:00Z","updated_at":"2026-06-19T12:00:00Z","state":{"mode":"catalog"},"outputs":[]}`,
		`{"schema_version":4,"schema_version":3}`, `{"schema_version":3,"Schema_Version":4}`,
		`{"schema_version":4,"created_at":"2026-06-19T12:00:00Z","updated_at":"2026-06-19T12:00:00Z","state":{"mode":"catalog","mode":"catalog"},"outputs":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, legacy, err := catalog.Parse(data)
		// The fast reader decides nothing the encoding/json reader would
		// decide otherwise.
		if rc, rl, rerr := catalog.ParseReference(data); !reflect.DeepEqual(cat, rc) || legacy != rl || errString(err) != errString(rerr) {
			t.Fatalf("Parse = %+v, %v, %v; reference %+v, %v, %v", cat, legacy, err, rc, rl, rerr)
		}
		switch {
		case err != nil:
			if cat != nil || legacy || errors.Is(err, catalog.ErrInvalid) == errors.Is(err, catalog.ErrNewer) {
				t.Fatalf("Parse error %v with cat %v, legacy %v: want exactly one of ErrInvalid, ErrNewer", err, cat, legacy)
			}
			return
		case legacy:
			if cat != nil {
				t.Fatal("legacy with a catalog")
			}
			return
		}
		b, err := catalog.Marshal(cat)
		if err != nil {
			t.Fatalf("Marshal of a parsed catalog: %v", err)
		}
		again, legacy, err := catalog.Parse(b)
		if err != nil || legacy {
			t.Fatalf("re-Parse: legacy %v, %v\n%s", legacy, err, b)
		}
		assertSameCatalog(t, again, cat)
		b2, err := catalog.Marshal(again)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("Marshal not stable (%v):\n%s\n%s", err, b, b2)
		}
	})
}
