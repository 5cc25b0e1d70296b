package transform

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .html files in testdata")

func newMarkdown(t testing.TB, opts MarkdownOptions) *Markdown {
	t.Helper()
	m, err := NewMarkdown(opts)
	if err != nil {
		t.Fatalf("NewMarkdown(%+v): %v", opts, err)
	}
	return m
}

// TestRenderGolden renders every testdata/**/*.md as the bundle path it has
// under testdata (with report.md as the index) and compares with the .html
// beside it.
func TestRenderGolden(t *testing.T) {
	m := newMarkdown(t, MarkdownOptions{Index: "report.md"})
	var sources []string
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			sources = append(sources, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) < 4 {
		t.Fatalf("found %d golden sources, want at least 4", len(sources))
	}
	for _, file := range sources {
		rel, _ := filepath.Rel("testdata", file)
		bundlePath := filepath.ToSlash(rel)
		t.Run(bundlePath, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Render(bundlePath, src)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			golden := strings.TrimSuffix(file, ".md") + ".html"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./transform/ -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Render(%q) differs from %s (go test ./transform/ -update rewrites it):\n%s", bundlePath, golden, got)
			}
		})
	}
}

var hrefRE = regexp.MustCompile(`<a href="([^"]*)"`)

func hrefs(page []byte) []string {
	var out []string
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

func TestLinkRewrite(t *testing.T) {
	tests := []struct {
		source, index, dest, want string
	}{
		{"a.md", "", "b.md", "b.html"},
		{"a.md", "", "./b.md", "b.html"},
		{"a.md", "", "b.md#part-2", "b.html#part-2"},
		{"a.md", "", "b.md?x=1#f", "b.html?x=1#f"},
		{"a.md", "", "a.md", "a.html"},
		{"a.md", "", "docs/b.md", "docs/b.html"},
		{"docs/a.md", "", "b.md", "b.html"},
		{"docs/a.md", "", "../b.md", "../b.html"},
		{"docs/x/a.md", "", "../../y/z/b.md", "../../y/z/b.html"},
		{"docs/x/a.md", "", "../y/b.md", "../y/b.html"},
		{"docs/a.md", "", "../docs/b.md", "b.html"},
		// Index mapping, from the root, a sub folder and the index itself.
		{"a.md", "report.md", "report.md", "index.html"},
		{"sub/x.md", "report.md", "../report.md", "../index.html"},
		{"sub/x.md", "report.md", "../report.md#top", "../index.html#top"},
		{"report.md", "report.md", "sub/x.md", "sub/x.html"},
		{"report.md", "report.md", "report.md#top", "index.html#top"},
		{"docs/a.md", "docs/x.md", "x.md", "index.html"},
		{"a.md", "docs/x.md", "docs/x.md", "docs/index.html"},
		{"docs/x.md", "docs/x.md", "../a.md", "../a.html"},
		// Names needing escapes.
		{"a.md", "", "<my notes.md>", "my%20notes.html"},
		{"a.md", "", "my%20notes.md", "my%20notes.html"},
		{"a.md", "", "caf%C3%A9.md", "caf%C3%A9.html"},
		{"a.md", "", `a\_b.md`, "a_b.html"},
		{"a.md", "", "a&amp;b.md", "a%26b.html"},
		{"a.md", "", "./a:b.md", "./a:b.html"},
		{"x/a.md", "", "../c:d/e.md", "../c:d/e.html"},
		// Left alone.
		{"a.md", "", "https://example.com/b.md", "https://example.com/b.md"},
		{"a.md", "", "HTTP://example.com/b.md#x", "HTTP://example.com/b.md#x"},
		{"a.md", "", "mailto:x@example.com", "mailto:x@example.com"},
		{"a.md", "", "//cdn.example.com/b.md", "//cdn.example.com/b.md"},
		{"a.md", "", "#section", "#section"},
		{"a.md", "", "/abs/b.md", "/abs/b.md"},
		{"a.md", "", "b.txt", "b.txt"},
		{"a.md", "", "b.md.txt", "b.md.txt"},
		{"a.md", "", "b.MD", "b.MD"},
		{"a.md", "", "sub/", "sub/"},
		{"a.md", "", "../outside.md", "../outside.md"},
		{"docs/a.md", "", "../../outside.md", "../../outside.md"},
		{"a.md", "", "bad%zz.md", "bad%25zz.md"}, // not decodable: untouched (renderer escapes the bare %)
	}
	for _, tt := range tests {
		t.Run(tt.source+"->"+tt.dest, func(t *testing.T) {
			m := newMarkdown(t, MarkdownOptions{Index: tt.index})
			page, err := m.Render(tt.source, []byte("[link]("+tt.dest+")\n"))
			if err != nil {
				t.Fatal(err)
			}
			got := hrefs(page)
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("from %q (index %q), [link](%s) rendered hrefs %q, want [%q]", tt.source, tt.index, tt.dest, got, tt.want)
			}
		})
	}
}

func TestReferenceLinkRewritten(t *testing.T) {
	m := newMarkdown(t, MarkdownOptions{Index: "report.md"})
	page, err := m.Render("sub/x.md", []byte("[home][h] and [other]\n\n[h]: ../report.md#top\n[other]: y.md\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(hrefs(page)), "[../index.html#top y.html]"; got != want {
		t.Errorf("hrefs = %s, want %s", got, want)
	}
}

func TestTitle(t *testing.T) {
	tests := []struct {
		name, source, src, want string
	}{
		{"h1", "a.md", "# Hello world\n", "<title>Hello world</title>"},
		{"first of any level", "a.md", "text\n\n### Third level\n\n# Later h1\n", "<title>Third level</title>"},
		{"setext", "a.md", "Setext *title*\n===\n", "<title>Setext title</title>"},
		{"inline markup and escapes", "a.md", "# A **bold** `x<y` \\*star\\* &amp; &#65;\n", "<title>A bold x&lt;y *star* &amp; A</title>"},
		{"raw html dropped", "a.md", "# Hi <script>x</script> there\n", "<title>Hi x there</title>"},
		{"link text", "a.md", "# See [docs](b.md) and <https://e.com>\n", "<title>See docs and https://e.com</title>"},
		{"empty heading skipped", "a.md", "#\n\n## Real\n", "<title>Real</title>"},
		{"fallback to base name", "dir/daily.report.md", "no heading\n", "<title>daily.report</title>"},
		{"fallback escaped", "a&b<c>.md", "no heading\n", "<title>a&amp;b&lt;c&gt;</title>"},
		{"empty source", "empty.md", "", "<title>empty</title>"},
		{"bom", "a.md", "\uFEFF# After BOM\n", "<title>After BOM</title>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMarkdown(t, MarkdownOptions{})
			page, err := m.Render(tt.source, []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(page, []byte("\n"+tt.want+"\n")) {
				t.Errorf("page lacks %s:\n%s", tt.want, page)
			}
		})
	}
}

// TestRawHTMLNotRendered checks safe mode directly, independent of goldens.
func TestRawHTMLNotRendered(t *testing.T) {
	m := newMarkdown(t, MarkdownOptions{})
	src := "# T\n\n<script>alert(1)</script>\n\ntext <script>alert(2)</script> <b onclick=x>b</b>\n\n[x](javascript:alert(3))\n\n```html\n<script>alert(4)</script>\n```\n"
	page, err := m.Render("a.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "alert(1)", "onclick", "javascript:"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("page contains %q:\n%s", bad, page)
		}
	}
	// Inline tags go, their text stays as inert text.
	for _, want := range []string{
		"<p>text <!-- raw HTML omitted -->alert(2)<!-- raw HTML omitted --> <!-- raw HTML omitted -->b<!-- raw HTML omitted --></p>\n",
		`<p><a href="">x</a></p>`,
		`<pre><code class="language-html">&lt;script&gt;alert(4)&lt;/script&gt;`,
	} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page lacks %s:\n%s", want, page)
		}
	}
}

func TestDefaultPageShape(t *testing.T) {
	m := newMarkdown(t, MarkdownOptions{})
	page, err := m.Render("a.md", []byte("# T\n\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{
		"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		"max-width: 48rem",
		"<main>\n<h1 id=\"t\">T</h1>\n<p>body</p>\n</main>\n</body>\n</html>\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q:\n%s", want, s)
		}
	}
	if !strings.HasPrefix(s, "<!DOCTYPE html>") {
		t.Errorf("page does not start with the doctype")
	}
}

func TestRenderDeterministic(t *testing.T) {
	src := benchDoc(8 << 10)
	m1 := newMarkdown(t, MarkdownOptions{Index: "report.md"})
	m2 := newMarkdown(t, MarkdownOptions{Index: "report.md"})
	want, err := m1.Render("sub/doc.md", src)
	if err != nil {
		t.Fatal(err)
	}
	// Same instance, a fresh instance, and concurrent renders (run with -race).
	var wg sync.WaitGroup
	results := make([][]byte, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := m1
			if i%2 == 1 {
				m = m2
			}
			results[i], _ = m.Render("sub/doc.md", src)
		}()
	}
	wg.Wait()
	for i, got := range results {
		if !bytes.Equal(got, want) {
			t.Fatalf("render %d differs from the first (%d vs %d bytes)", i, len(got), len(want))
		}
	}
	// The input slice must not be modified.
	if !bytes.Equal(src, benchDoc(8<<10)) {
		t.Fatal("Render modified its input")
	}
}

func TestRenderInvalidUTF8(t *testing.T) {
	m := newMarkdown(t, MarkdownOptions{})
	_, err := m.Render("docs/latin1.md", []byte("# Caf\xe9\n"))
	if !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("err = %v, want ErrInvalidUTF8", err)
	}
	if want := `markdown_to_html: source "docs/latin1.md" is not valid UTF-8; save it as UTF-8`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestTemplateFile(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "page.html")
	const text = `<!doctype html><title>{{.Title}}</title><p class="src">{{.SourcePath}}</p>{{.Body}}`
	if err := os.WriteFile(tmpl, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newMarkdown(t, MarkdownOptions{TemplateFile: tmpl, Index: "r.md"})
	got, err := m.Render("x/<a>.md", []byte("# A & B\n\n[r](../r.md)\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `<!doctype html><title>A &amp; B</title><p class="src">x/&lt;a&gt;.md</p><h1 id="a--b">A &amp; B</h1>` + "\n" +
		`<p><a href="../index.html">r</a></p>` + "\n"
	if string(got) != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestTemplateFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing.html")
	badSyntax := write("bad.html", "<p>{{.Title</p>")
	badField := write("field.html", "<p>{{.Author}}</p>")

	tests := []struct {
		name, file, want string
		is               error
	}{
		{"missing", missing, fmt.Sprintf("markdown_to_html template file %q cannot be read: no such file or directory; fix the path or remove the template setting", missing), fs.ErrNotExist},
		{"directory", dir, fmt.Sprintf("markdown_to_html template file %q cannot be read: is a directory; fix the path or remove the template setting", dir), nil},
		{"syntax", badSyntax, fmt.Sprintf("markdown_to_html template file %q is not a valid html/template: ", badSyntax), nil},
		{"unknown field", badField, fmt.Sprintf("markdown_to_html template file %q fails to execute: ", badField), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMarkdown(MarkdownOptions{TemplateFile: tt.file})
			if err == nil {
				t.Fatalf("NewMarkdown succeeded (%v), want error", m)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.want) {
				t.Errorf("err = %q, want prefix %q", msg, tt.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("err spans lines: %q", msg)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false", tt.is)
			}
		})
	}
}

func TestOutputPath(t *testing.T) {
	tests := []struct {
		index, source, want string
	}{
		{"", "a.md", "a.html"},
		{"", "a/b.md", "a/b.html"},
		{"", "a/b.c.md", "a/b.c.html"},
		{"", "a/README", "a/README.html"},
		{"", "notes.markdown", "notes.html"},
		{"", "index.md", "index.html"},
		{"report.md", "report.md", "index.html"},
		{"report.md", "sub/report.md", "sub/report.html"},
		{"report.md", "other.md", "other.html"},
		{"./report.md", "report.md", "index.html"},
		{"docs/x.md", "docs/x.md", "docs/index.html"},
		{"docs/x.md", "x.md", "x.html"},
		{"docs/x.md", "docs/y.md", "docs/y.html"},
	}
	for _, tt := range tests {
		m := newMarkdown(t, MarkdownOptions{Index: tt.index})
		if got := m.OutputPath(tt.source); got != tt.want {
			t.Errorf("index %q: OutputPath(%q) = %q, want %q", tt.index, tt.source, got, tt.want)
		}
	}
}

// benchDoc builds a deterministic Markdown document of about size bytes that
// exercises headings, tables, code, lists and rewritten links.
func benchDoc(size int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "## Section %d\n\n", i)
		fmt.Fprintf(&b, "Paragraph with *emphasis*, **strong**, `code<%d>`, a [link](other%d.md#s), ", i, i)
		b.WriteString("an autolink https://example.com/page and ~~struck~~ text & more.\n\n")
		b.WriteString("| a | b | c |\n|---|:-:|--:|\n| 1 | 2 | 3 |\n| x | y | z |\n\n")
		b.WriteString("- [x] done\n- [ ] todo\n  - nested item\n\n")
		b.WriteString("```go\nfunc f() { if a < b { return } }\n```\n\n")
	}
	return b.Bytes()
}

func BenchmarkRender(b *testing.B) {
	src := benchDoc(50 << 10)
	m := newMarkdown(b, MarkdownOptions{Index: "report.md"})
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Render("sub/doc.md", src); err != nil {
			b.Fatal(err)
		}
	}
}
