package service

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/transform"
)

// Desire maps a bundle onto a destination: publish selection, layout prefix,
// transforms and links. Copied sources take sha256 and size from the manifest
// (nothing is read); generated outputs are rendered here, from verified
// source bytes, so their digest is known before planning.
func Desire(ctx context.Context, d config.Destination, pipelineID string, b *bundle.Bundle) ([]engine.Output, error) {
	prefix, err := d.Prefix(b.Manifest.ID, pipelineID)
	if err != nil {
		return nil, err
	}
	var renderers []*markdownRule
	if d.Publish.HTML {
		for _, t := range d.Transforms {
			if t.Name != transform.MarkdownToHTML {
				return nil, fmt.Errorf("unknown transform %q", t.Name)
			}
			md, err := transform.NewMarkdown(transform.MarkdownOptions{TemplateFile: t.Template, Index: t.Index})
			if err != nil {
				return nil, err
			}
			renderers = append(renderers, &markdownRule{match: t.Match, md: md})
		}
	}

	// One output per file in the common case: growing the slice copied
	// these large records several times over.
	outs := make([]engine.Output, 0, len(b.Manifest.Files))
	for _, f := range b.Manifest.Files {
		ok, err := selected(d.Publish.Include, d.Publish.Exclude, f.Path)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if d.Publish.Sources {
			p := prefix + f.Path
			outs = append(outs, engine.Output{Desired: planner.Desired{
				Path: p, From: f.Path, Kind: catalog.KindSource, SHA256: f.SHA256, Size: f.Size, URL: outputURL(d.Links, p),
			}})
		}
		for _, r := range renderers {
			if m, _ := doublestar.Match(r.match, f.Path); !m {
				continue
			}
			src, err := b.ReadAll(ctx, f.Path)
			if err != nil {
				return nil, err
			}
			html, err := r.md.Render(f.Path, src)
			if err != nil {
				return nil, err
			}
			p := prefix + r.md.OutputPath(f.Path)
			sum := sha256.Sum256(html)
			outs = append(outs, engine.Output{Content: html, Desired: planner.Desired{
				Path: p, From: f.Path, Kind: catalog.KindGenerated, Transform: transform.MarkdownToHTML,
				SHA256: catalog.Digest(sum[:]), Size: int64(len(html)), URL: outputURL(d.Links, p),
			}})
			break // the first matching transform wins
		}
	}
	return outs, nil
}

type markdownRule struct {
	match string
	md    *transform.Markdown
}

func selected(include, exclude []string, p string) (bool, error) {
	in := len(include) == 0
	for _, g := range include {
		m, err := doublestar.Match(g, p)
		if err != nil {
			return false, fmt.Errorf("publish.include %q: %w", g, err)
		}
		if m {
			in = true
			break
		}
	}
	if !in {
		return false, nil
	}
	for _, g := range exclude {
		m, err := doublestar.Match(g, p)
		if err != nil {
			return false, fmt.Errorf("publish.exclude %q: %w", g, err)
		}
		if m {
			return false, nil
		}
	}
	return true, nil
}

// outputURL derives an output's public URL; "" when no base URL is set.
// With pretty links ".../index.html" becomes ".../".
func outputURL(l config.Links, p string) string {
	if l.BaseURL == "" {
		return ""
	}
	if l.Pretty {
		if p == "index.html" {
			p = ""
		} else if strings.HasSuffix(p, "/index.html") {
			p = strings.TrimSuffix(p, "index.html")
		}
	}
	base := l.BaseURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base + escapeURLPath(p)
}

func escapeURLPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = pathEscape(s)
	}
	return strings.Join(segs, "/")
}

func pathEscape(s string) string { return (&url.URL{Path: s}).EscapedPath() }

// VisibilityGroup is the publish_last group in which a write of path
// becomes visible (engine.GroupOf), for commands that show a plan.
func VisibilityGroup(path string, publishLast []string) int { return engine.GroupOf(path, publishLast) }

// PublicationTo is the publication of b to d for pipelineID: its owner,
// workflow and limits, and b's source and outputs on d (Desire). The
// caller sets the event and the operator's options.
func PublicationTo(ctx context.Context, d config.Destination, pipelineID string, b *bundle.Bundle) (engine.Publication, error) {
	outs, err := Desire(ctx, d, pipelineID, b)
	if err != nil {
		return engine.Publication{}, fmt.Errorf("destination %q: %w", d.ID, err)
	}
	return engine.Publication{Owner: catalog.Owner{PipelineID: pipelineID, DestinationID: d.ID}, Workflow: d.Workflow, MaxDeletes: d.MaxDeletes,
		Source:  catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()},
		Outputs: outs, Bundle: b, PublishLast: d.PublishLast, RetainPrevious: time.Duration(d.RetainPrevious)}, nil
}
