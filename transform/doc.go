// Package transform turns bundle files into generated outputs.
//
// Each transform is named by a constant (the name used in destination config
// and recorded as the output's transform in the catalog). A transform must be
// deterministic: the same source bytes and options always yield the same
// output bytes, so a redelivered bundle plans no writes.
package transform

// MarkdownToHTML is the name of the Markdown → HTML5 page transform.
const MarkdownToHTML = "markdown_to_html"
