package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestDuplicate(t *testing.T) {
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `"last":0}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, doc string
		want      *DuplicateError // nil = none
	}{
		{"none", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, nil},
		{"empty", `{}`, nil},
		{"scalar", `"x"`, nil},
		{"top", `{"schema_version": 4, "schema_version": 3}`, &DuplicateError{Key: "schema_version"}},
		{"nested", `{"a":{"b":1,"c":{"d":1,"d":2}}}`, &DuplicateError{Key: "d", Path: "a.c"}},
		{"in-array", `{"outputs":[{"p":1},{"p":1,"source":{"id":"x","id":"y"}}]}`,
			&DuplicateError{Key: "id", Path: "outputs[1].source"}},
		{"array-of-arrays", `[[1],[{"a":1}],[{"b":1},{"b":1,"b":2}]]`, &DuplicateError{Key: "b", Path: "[2][1]"}},
		{"case", `{"size":1,"Size":2}`, &DuplicateError{Key: "Size"}},
		{"escaped", `{"a":1,"\u0061":2}`, &DuplicateError{Key: "a"}},
		{"kelvin", `{"k":1,"\u212a":2}`, &DuplicateError{Key: "\u212a"}},
		{"long-s", `{"size":1,"ſize":2}`, &DuplicateError{Key: "ſize"}},
		{"key-with-quote", `{"a\"b":1,"a\"b":2}`, &DuplicateError{Key: `a"b`}},
		{"backslash-end", `{"a\\":1,"a\\":2}`, &DuplicateError{Key: `a\`}},
		{"backslash-differs", `{"a\\":1,"a":2}`, nil},
		{"keys-in-values", `{"a":"{\"b\":1,\"b\":2}","b":["a","a"]}`, nil},
		{"after-close", `{"a":{"x":1},"b":{"x":1},"a":0}`, &DuplicateError{Key: "a"}},
		{"path-escaped-key", `{"o\u00fc":[{"x":1,"x":1}]}`, &DuplicateError{Key: "x", Path: "oü[0]"}},
		{"many-none", many(""), nil},
		{"many-late", many(`"K7":1,`), &DuplicateError{Key: "K7"}},
		{"many-first-small", `{"a":1,"b":2,"a":3,` + many("")[1:], &DuplicateError{Key: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.doc)) {
				t.Fatalf("test document is not JSON: %s", tc.doc)
			}
			got := Duplicate([]byte(tc.doc))
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("Duplicate(%s) = %#v, want %#v", tc.doc, got, tc.want)
			}
		})
	}
}

func TestDuplicateErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  DuplicateError
		want string
	}{
		{DuplicateError{Key: "schema_version"}, `duplicate key "schema_version"`},
		{DuplicateError{Key: "id", Path: "outputs[0].source"}, `duplicate key "id" in outputs[0].source`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

// reference finds a repeated key with encoding/json's tokens and
// bytes.EqualFold, the comparison encoding/json documents for field names.
func reference(data []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var value func() (bool, error)
	value = func() (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		switch tok {
		case json.Delim('{'):
			var keys []string
			found := false
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false, err
				}
				for _, o := range keys {
					found = found || bytes.EqualFold([]byte(o), []byte(k.(string)))
				}
				keys = append(keys, k.(string))
				d, err := value()
				if err != nil {
					return false, err
				}
				found = found || d
			}
			_, err := dec.Token()
			return found, err
		case json.Delim('['):
			found := false
			for dec.More() {
				d, err := value()
				if err != nil {
					return false, err
				}
				found = found || d
			}
			_, err := dec.Token()
			return found, err
		}
		return false, nil
	}
	found, err := value()
	if err != nil {
		return false, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, errors.New("trailing data")
	}
	return found, nil
}

// FuzzDuplicate: Duplicate never panics and, on valid JSON, agrees with the
// token-based reference.
func FuzzDuplicate(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"C":2}]}}`, `{"k":1,"\u212a":2}`, `{"a\\":1,"a":2}`,
		`[{"x":"\"","x":1}]`, `{"a":"{\"b\":1,\"b\":2}"}`, `{"\ud800":1,"\ufffd":2}`, `{"ſ":1,"S":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Duplicate(data)
		if !json.Valid(data) {
			return
		}
		want, err := reference(data)
		if err != nil {
			t.Fatalf("reference on valid JSON: %v", err)
		}
		if (got != nil) != want {
			t.Fatalf("Duplicate(%q) = %v, reference says duplicate: %v", data, got, want)
		}
	})
}

// BenchmarkDuplicate scans a catalog-shaped document of 100,000 records.
func BenchmarkDuplicate(b *testing.B) {
	type src struct{ ID, Digest, Created string }
	type rec struct {
		Path, PipelineID, DestinationID string
		Source                          src
		Kind, SHA256                    string
		Size                            int
		CreatedAt, UpdatedAt            string
	}
	recs := make([]rec, 100_000)
	for i := range recs {
		recs[i] = rec{fmt.Sprintf("dir%02d/file%06d.bin", i%50, i), "weatherreporter.daily", "latest-html",
			src{"weatherreporter.tomorrow", fmt.Sprintf("sha256:%064x", 1), "2026-06-19T12:00:00Z"},
			"source", fmt.Sprintf("sha256:%064x", i), 4096, "2026-06-19T12:00:00Z", "2026-06-19T12:00:00Z"}
	}
	data, err := json.MarshalIndent(map[string]any{"schema_version": 4, "outputs": recs}, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if d := Duplicate(data); d != nil {
			b.Fatal(d)
		}
	}
}
