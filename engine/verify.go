package engine

import (
	"context"
	"fmt"
	"io"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// verifySelection reads root's catalog record by record and returns the
// records match selects, in path order, holding only those: a verify of
// one pipeline holds that pipeline's records, never the whole catalog.
// The catalog must still be the one marked before (its catalogMark),
// else a publication replaced it meanwhile and the verify is unsettled.
// Legacy state is ErrLegacyCatalog; no catalog selects nothing.
func verifySelection(ctx context.Context, root storage.Backend, before storage.Version, match func(catalog.Output) bool) ([]catalog.Output, error) {
	var selected []catalog.Output
	head, err := streamCatalog(ctx, root, func(r io.Reader) (catalog.Head, error) {
		return catalog.Scan(r, -1, func(rec *catalog.Record) error {
			if match(rec.Output) {
				selected = append(selected, rec.Keep())
			}
			return nil
		})
	}, func(outs []catalog.Output) {
		selected = nil
		for _, o := range outs {
			if match(o) {
				// Copied: the records read whole point into the document.
				selected = append(selected, (&catalog.Record{Output: o}).Keep())
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if head.legacy {
		return nil, fmt.Errorf("%s: %w", root, ErrLegacyCatalog)
	}
	if now, err := catalogMark(ctx, root); err != nil {
		return nil, err
	} else if now != before {
		return nil, unsettled(root)
	}
	return selected, nil
}
