// Package docs_test checks the documents integrators read: every relative
// link resolves inside the repository, and every JSON example matches its
// schema in docs/schema and decodes with distributor's own decoder.
package docs_test

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv/schematest"
)

// documents are README.md and docs/*.md, relative to the repository root.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, rel)
	}
	return out
}

func parse(t *testing.T, root, doc string) (ast.Node, []byte) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	return goldmark.New().Parser().Parse(text.NewReader(src)), src
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// TestRelativeLinksResolve: a link that is not a URL names a file or folder
// of the repository (a clone has nothing else).
func TestRelativeLinksResolve(t *testing.T) {
	root := schematest.RepoRoot(t)
	checked := 0
	for _, doc := range documents(t, root) {
		node, _ := parse(t, root, doc)
		err := ast.Walk(node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			var dest string
			switch l := n.(type) {
			case *ast.Link:
				dest = string(l.Destination)
			case *ast.Image:
				dest = string(l.Destination)
			default:
				return ast.WalkContinue, nil
			}
			if dest == "" || strings.HasPrefix(dest, "#") || scheme.MatchString(dest) {
				return ast.WalkContinue, nil
			}
			checked++
			p, _, _ := strings.Cut(dest, "#")
			if u, err := url.PathUnescape(p); err == nil {
				p = u
			}
			target := filepath.Join(root, filepath.Dir(doc), filepath.FromSlash(p))
			if rel, err := filepath.Rel(root, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository", doc, dest)
			} else if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %q: %s does not exist", doc, dest, rel)
			}
			return ast.WalkContinue, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk is broken")
	}
}

// example is one fenced JSON block and the schema its info string names
// ("```json schema=published.json").
type example struct {
	doc    string
	line   int
	schema string
	body   []byte
}

func examples(t *testing.T, root string) []example {
	t.Helper()
	var out []example
	for _, doc := range documents(t, root) {
		node, src := parse(t, root, doc)
		_ = ast.Walk(node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			fc, ok := n.(*ast.FencedCodeBlock)
			if !entering || !ok || fc.Info == nil {
				return ast.WalkContinue, nil
			}
			info := strings.Fields(string(fc.Info.Segment.Value(src)))
			if len(info) == 0 || info[0] != "json" {
				return ast.WalkContinue, nil
			}
			ex := example{doc: doc, line: 1 + bytes.Count(src[:fc.Info.Segment.Start], []byte("\n"))}
			for _, f := range info[1:] {
				if v, ok := strings.CutPrefix(f, "schema="); ok {
					ex.schema = v
				}
			}
			lines := fc.Lines()
			for i := range lines.Len() {
				seg := lines.At(i)
				ex.body = append(ex.body, seg.Value(src)...)
			}
			out = append(out, ex)
			return ast.WalkContinue, nil
		})
	}
	return out
}

// TestJSONExamplesMatchSchemas: every ```json block of README.md and docs/
// names its schema (schema=none for JSON that is no event or catalog), matches
// it, and decodes with the decoder distributor itself uses.
func TestJSONExamplesMatchSchemas(t *testing.T) {
	root := schematest.RepoRoot(t)
	s := schematest.New(t)
	exs := examples(t, root)
	validated := map[string]int{}
	for _, ex := range exs {
		where := ex.doc + ":" + strconv.Itoa(ex.line)
		switch {
		case ex.schema == "":
			t.Errorf("%s: a ```json block without schema=<file in docs/schema> (or schema=none)", where)
			continue
		case ex.schema == "none":
			continue
		}
		if err := s.Validate(t, ex.schema, ex.body); err != nil {
			t.Errorf("%s: example does not match docs/schema/%s: %v\n%s", where, ex.schema, err, ex.body)
			continue
		}
		validated[ex.doc]++
		file, _, _ := strings.Cut(ex.schema, "#")
		var err error
		switch file {
		case "bundle-ready.json":
			_, err = events.DecodeBundleReady(ex.body)
		case "notify_failed.json":
			_, err = events.DecodeNotifyFailed(ex.body)
		case "cli-status.json", "cli-history.json", "cli-rollback.json", "unlock.json", "cli-doctor.json":
			// What the CLI prints; no package decodes it.
		case "catalog-v4.json":
			var legacy bool
			_, legacy, err = catalog.Parse(ex.body)
			if err == nil && legacy {
				t.Errorf("%s: Parse reads the example as legacy state", where)
			}
		default:
			var r events.Result
			if r, err = events.DecodeResult(ex.body); err == nil && r.Type+".json" != file && file != "result.json" {
				t.Errorf("%s: a %s event checked against %s", where, r.Type, file)
			}
		}
		if err != nil {
			t.Errorf("%s: matches docs/schema/%s but distributor does not decode it: %v", where, ex.schema, err)
		}
	}
	for _, doc := range []string{"docs/events.md", "docs/catalog.md"} {
		if validated[doc] == 0 {
			t.Errorf("%s: no JSON example validated", doc)
		}
	}
}
