package transform

// defaultPage is the built-in page: self-contained (no external assets) so a
// published folder reads well straight from disk or a bucket.
const defaultPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
:root { color-scheme: light dark; }
body { margin: 0; padding: 2rem 1rem; font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; font-size: 1rem; line-height: 1.6; color: #1f2328; background: #fff; }
main { max-width: 48rem; margin: 0 auto; }
h1, h2, h3, h4, h5, h6 { line-height: 1.25; margin: 1.6em 0 0.6em; }
h1 { font-size: 2em; } h2 { font-size: 1.5em; } h1, h2 { padding-bottom: 0.3em; border-bottom: 1px solid #d1d9e0; }
a { color: #0969da; }
img { max-width: 100%; }
blockquote { margin: 0 0 1em; padding: 0 1em; color: #59636e; border-left: 0.25em solid #d1d9e0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.875em; }
code { padding: 0.2em 0.4em; border-radius: 6px; background: #eff1f3; }
pre { padding: 1em; overflow: auto; line-height: 1.45; border-radius: 6px; background: #f6f8fa; }
pre code { padding: 0; background: none; font-size: 1em; }
table { border-collapse: collapse; margin: 0 0 1em; display: block; overflow: auto; }
th, td { padding: 0.4em 0.8em; border: 1px solid #d1d9e0; }
th { background: #f6f8fa; }
hr { border: 0; border-top: 1px solid #d1d9e0; margin: 1.5em 0; }
@media (prefers-color-scheme: dark) {
  body { color: #e6edf3; background: #0d1117; }
  a { color: #4493f8; }
  h1, h2, th, td, hr, blockquote { border-color: #3d444d; }
  blockquote { color: #9198a1; }
  code { background: #262c36; } pre, th { background: #151b23; }
}
</style>
</head>
<body>
<main>
{{.Body}}</main>
</body>
</html>
`
