package notify

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// purge sends one request per changed URL, for caches that purge by URL
// (Varnish, Fastly).
type purge struct {
	dest        config.Destination
	method      string
	concurrency int
}

func (p *purge) send(ctx context.Context, r events.Result, _ []byte) error {
	urls := ChangedURLs(p.dest, r)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(p.concurrency)
	errs := make([]error, len(urls))
	for i, u := range urls {
		g.Go(func() error {
			req, err := http.NewRequestWithContext(ctx, p.method, u, nil)
			if err == nil {
				req.Header.Set("User-Agent", "distributor")
				req.Header.Set(HeaderEventID, r.ID)
				err = do(req)
			}
			errs[i] = err
			return nil // the other URLs are purged all the same
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// ChangedURLs are the URLs of the outputs r wrote, updated or deleted:
// each output's url, else links.base_url and its path.
func ChangedURLs(d config.Destination, r events.Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range r.Outputs {
		u := o.URL
		if u == "" && d.Links.BaseURL != "" {
			u = d.Links.BaseURL + o.Path
		}
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
		if o.Path == "index.html" || strings.HasSuffix(o.Path, "/index.html") {
			// The folder's URL serves the same page.
			if dir := d.Links.BaseURL + strings.TrimSuffix(o.Path, "index.html"); d.Links.BaseURL != "" && !seen[dir] {
				seen[dir] = true
				out = append(out, dir)
			}
		}
	}
	return out
}
