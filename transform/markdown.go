package transform

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// ErrInvalidUTF8 is returned (wrapped) by Render when the source is not UTF-8.
var ErrInvalidUTF8 = errors.New("not valid UTF-8")

// MarkdownOptions configures the markdown_to_html transform.
type MarkdownOptions struct {
	// TemplateFile is an optional html/template file for the page. It is
	// executed with .Title (string), .Body (template.HTML) and .SourcePath
	// (string). Empty means the built-in page.
	TemplateFile string

	// Index is the bundle path of the source that renders to index.html in
	// its own folder (e.g. "report.md" → "index.html"). Empty means none.
	Index string
}

// Markdown renders Markdown sources to complete HTML5 pages. It is safe for
// concurrent use.
type Markdown struct {
	md           goldmark.Markdown
	page         *template.Template
	templateFile string // "" for the built-in page; named in errors
	index        string
}

// pageData is what the page template sees.
type pageData struct {
	Title      string
	Body       template.HTML
	SourcePath string
}

// NewMarkdown builds the transform; a template file is read, parsed and
// trial-executed here so that a broken template fails at startup, not per file.
func NewMarkdown(opts MarkdownOptions) (*Markdown, error) {
	m := &Markdown{
		templateFile: opts.TemplateFile,
		index:        path.Clean(opts.Index),
	}
	if opts.Index == "" {
		m.index = ""
	}
	m.md = goldmark.New(
		// No html.WithUnsafe: raw HTML in sources is omitted and
		// javascript: style links are dropped.
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(
			// Heading ids make rewritten "other.md#section" links land.
			parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(&linkRewriter{m: m}, 100)),
		),
	)

	if opts.TemplateFile == "" {
		m.page = template.Must(template.New("page").Parse(defaultPage))
		return m, nil
	}
	raw, err := os.ReadFile(opts.TemplateFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in our message
		}
		return nil, fmt.Errorf("markdown_to_html template file %q cannot be read: %w; fix the path or remove the template setting", opts.TemplateFile, err)
	}
	page, err := template.New(filepath.Base(opts.TemplateFile)).Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("markdown_to_html template file %q is not a valid html/template: %w", opts.TemplateFile, err)
	}

	// Catch execution-time mistakes ({{.Nope}}, bad calls) now.
	if err := page.Execute(io.Discard, pageData{Title: "t", Body: "<p>b</p>", SourcePath: "s.md"}); err != nil {
		return nil, fmt.Errorf("markdown_to_html template file %q fails to execute: %w; it may use only .Title, .Body and .SourcePath", opts.TemplateFile, err)
	}
	m.page = page
	return m, nil
}

// OutputPath is the bundle path of the page generated from sourcePath: the
// extension is replaced by ".html", and the Index source becomes
// "index.html" in its own folder.
func (m *Markdown) OutputPath(sourcePath string) string {
	if m.index != "" && sourcePath == m.index {
		return path.Join(path.Dir(sourcePath), "index.html")
	}
	return strings.TrimSuffix(sourcePath, path.Ext(sourcePath)) + ".html"
}

// renderContext carries the file being rendered to the link rewriter; a
// wrapper type avoids goldmark's global (unsynchronized) context keys.
type renderContext struct {
	parser.Context
	sourcePath string
}

// Render converts src (the bytes of the bundle file sourcePath) into a
// complete HTML5 page. The result depends only on the arguments and the
// options, byte for byte.
func (m *Markdown) Render(sourcePath string, src []byte) ([]byte, error) {
	if !utf8.Valid(src) {
		return nil, fmt.Errorf("markdown_to_html: source %q is %w; save it as UTF-8", sourcePath, ErrInvalidUTF8)
	}
	src = bytes.TrimPrefix(src, []byte("\uFEFF")) // a BOM would hide a leading heading

	pc := &renderContext{Context: parser.NewContext(), sourcePath: sourcePath}
	doc := m.md.Parser().Parse(text.NewReader(src), parser.WithContext(pc))

	var body bytes.Buffer
	if err := m.md.Renderer().Render(&body, src, doc); err != nil {
		return nil, fmt.Errorf("markdown_to_html: render %q: %w", sourcePath, err)
	}
	title := firstHeading(doc, src)
	if title == "" {
		base := path.Base(sourcePath)
		title = strings.TrimSuffix(base, path.Ext(base))
	}

	var out bytes.Buffer
	out.Grow(body.Len() + len(defaultPage) + 256)
	data := pageData{Title: title, Body: template.HTML(body.String()), SourcePath: sourcePath}
	if err := m.page.Execute(&out, data); err != nil {
		if m.templateFile != "" {
			return nil, fmt.Errorf("markdown_to_html template file %q failed on %q: %w", m.templateFile, sourcePath, err)
		}
		return nil, fmt.Errorf("markdown_to_html: page for %q: %w", sourcePath, err)
	}
	return out.Bytes(), nil
}

// firstHeading returns the plain text of the first heading that has any,
// with backslash escapes and character references resolved (the template
// escapes it again).
func firstHeading(doc ast.Node, src []byte) string {
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		h, ok := n.(*ast.Heading)
		if !ok {
			continue
		}
		var b strings.Builder
		inlineText(&b, h, src)
		if t := strings.Join(strings.Fields(b.String()), " "); t != "" {
			return t
		}
	}
	return ""
}

func inlineText(b *strings.Builder, n ast.Node, src []byte) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			v := c.Value(src)
			if _, inCode := n.(*ast.CodeSpan); !inCode && !c.IsRaw() {
				v = util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(v)))
			}
			b.Write(v)
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.Label(src))
		case *ast.RawHTML:
			// omitted from the page in safe mode, so from the title too
		default:
			inlineText(b, c, src)
		}
	}
}
