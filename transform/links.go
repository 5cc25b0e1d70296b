package transform

import (
	"net/url"
	"path"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// linkRewriter points relative links to other .md files at the pages
// generated from them, so a published set of pages links to itself.
type linkRewriter struct {
	m *Markdown
}

func (r *linkRewriter) Transform(doc *ast.Document, _ text.Reader, pc parser.Context) {
	rc, ok := pc.(*renderContext)
	if !ok {
		return
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if link, ok := n.(*ast.Link); ok {
			if dest, ok := r.rewrite(rc.sourcePath, link.Destination); ok {
				link.Destination = dest
			}
		}
		return ast.WalkContinue, nil
	})
}

// rewrite maps a link destination found in sourcePath to the generated page
// it should point to. ok is false when the link is left as written: not a
// relative path to a .md file inside the bundle.
func (r *linkRewriter) rewrite(sourcePath string, raw []byte) ([]byte, bool) {
	// The destination is as written; resolve escapes and references the way
	// the renderer would before looking at it.
	dest := string(util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(raw))))
	if dest == "" || strings.HasPrefix(dest, "#") || strings.HasPrefix(dest, "/") || hasScheme(dest) {
		return nil, false
	}
	p, suffix := dest, ""
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p, suffix = p[:i], p[i:]
	}
	if !strings.HasSuffix(p, ".md") {
		return nil, false
	}
	name, err := url.PathUnescape(p)
	if err != nil {
		return nil, false
	}
	target := path.Join(path.Dir(sourcePath), name)
	if target == ".." || strings.HasPrefix(target, "../") {
		return nil, false // outside the bundle: no page is generated for it
	}
	rel := relPath(path.Dir(r.m.OutputPath(sourcePath)), r.m.OutputPath(target))
	return []byte(escapePath(rel) + suffix), true
}

// hasScheme reports whether s starts with a URL scheme ("https:", "mailto:").
func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// relPath is the relative URL path from directory fromDir to file to, both
// clean bundle paths ("." for the root).
func relPath(fromDir, to string) string {
	var from []string
	if fromDir != "." {
		from = strings.Split(fromDir, "/")
	}
	dst := strings.Split(to, "/")
	i := 0
	for i < len(from) && i < len(dst)-1 && from[i] == dst[i] {
		i++
	}
	parts := make([]string, 0, len(from)-i+len(dst)-i)
	for range from[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, dst[i:]...)
	return strings.Join(parts, "/")
}

// escapePath percent-encodes a relative path for an href. '&' is encoded too,
// because the renderer would otherwise read "&amp;" in a name as a reference.
func escapePath(p string) string {
	e := (&url.URL{Path: p}).EscapedPath()
	e = strings.ReplaceAll(e, "&", "%26")

	// A colon in the first segment would read as a scheme.
	if first, _, _ := strings.Cut(e, "/"); strings.Contains(first, ":") {
		e = "./" + e
	}
	return e
}
