package service

import (
	"testing"

	"github.com/distributor/distributor/config"
)

func TestOutputURL(t *testing.T) {
	t.Parallel()
	base := "https://reports.example.com/weather/"
	cases := []struct {
		links config.Links
		path  string
		want  string
	}{
		{config.Links{}, "tomorrow/index.html", ""}, // no base URL: no url at all
		{config.Links{BaseURL: base}, "tomorrow/index.html", base + "tomorrow/index.html"},
		{config.Links{BaseURL: base, Pretty: true}, "tomorrow/index.html", base + "tomorrow/"},
		{config.Links{BaseURL: base, Pretty: true}, "index.html", base},
		{config.Links{BaseURL: base, Pretty: true}, "tomorrow/report.md", base + "tomorrow/report.md"},
		{config.Links{BaseURL: base, Pretty: true}, "tomorrow/notindex.html", base + "tomorrow/notindex.html"},
		{config.Links{BaseURL: base, Pretty: true}, "a/myindex.html", base + "a/myindex.html"},
		{config.Links{BaseURL: base}, "data/a b#1?.csv", base + "data/a%20b%231%3F.csv"},
		{config.Links{BaseURL: base}, "données/été.csv", base + "donn%C3%A9es/%C3%A9t%C3%A9.csv"},
		{config.Links{BaseURL: "https://x.example/no-slash"}, "a.txt", "https://x.example/no-slash/a.txt"},
	}
	for _, c := range cases {
		if got := outputURL(c.links, c.path); got != c.want {
			t.Errorf("outputURL(%+v, %q) = %q, want %q", c.links, c.path, got, c.want)
		}
	}
}

func TestSelected(t *testing.T) {
	t.Parallel()
	cases := []struct {
		include, exclude []string
		path             string
		want             bool
	}{
		{nil, nil, "a/b.md", true},
		{[]string{"**"}, nil, "a/b.md", true},
		{[]string{"**/*.md"}, nil, "a/b.md", true},
		{[]string{"**/*.md"}, nil, "b.md", true},
		{[]string{"**/*.md"}, nil, "a/b.csv", false},
		{[]string{"**"}, []string{"drafts/**"}, "drafts/x.md", false},
		{[]string{"**"}, []string{"drafts/**"}, "final/x.md", true},
		{[]string{"*.md"}, nil, "a/b.md", false}, // '*' does not cross folders
	}
	for _, c := range cases {
		got, err := selected(c.include, c.exclude, c.path)
		if err != nil || got != c.want {
			t.Errorf("selected(%q, %q, %q) = %v, %v; want %v", c.include, c.exclude, c.path, got, err, c.want)
		}
	}
}
