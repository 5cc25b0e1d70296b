// Package schematest validates JSON documents against the JSON Schemas in
// docs/schema, for tests: the schemas are what integrators read, so every
// event and catalog the code writes is checked against them.
package schematest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RepoRoot is the folder holding go.mod, found upward from the working
// folder (a package's folder under go test).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working folder")
		}
		dir = parent
	}
}

// Set compiles the schemas of docs/schema on demand. Formats (date-time)
// are asserted, not just annotated.
type Set struct {
	dir      string
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// New returns the schemas of the repository's docs/schema.
func New(t testing.TB) *Set {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	return &Set{dir: filepath.Join(RepoRoot(t), "docs", "schema"), compiler: c, compiled: map[string]*jsonschema.Schema{}}
}

// Dir is the absolute path of docs/schema.
func (s *Set) Dir() string { return s.dir }

// Schema compiles ref: a file of docs/schema with an optional fragment
// ("bundle-ready.json#/$defs/admin").
func (s *Set) Schema(t testing.TB, ref string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[ref]; ok {
		return sch
	}
	sch, err := s.compiler.Compile(filepath.ToSlash(filepath.Join(s.dir, ref)))
	if err != nil {
		t.Fatalf("compile docs/schema/%s: %v", ref, err)
	}
	s.compiled[ref] = sch
	return sch
}

// Validate checks data (one JSON document) against ref; the error lists
// every violation.
func (s *Set) Validate(t testing.TB, ref string, data []byte) error {
	t.Helper()
	sch := s.Schema(t, ref)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// Raw returns the decoded JSON of a schema file, to inspect its keywords.
func (s *Set) Raw(t testing.TB, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dir, file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("docs/schema/%s: %v", file, err)
	}
	return m
}
