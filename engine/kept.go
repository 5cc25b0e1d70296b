package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// KeptResult is a result a publication kept in its root (KeepResult)
// because it could not deliver it.
type KeptResult struct {
	EventID string
	Owner   catalog.Owner

	// Result is the encoded result event.
	Result []byte

	// Since is when it was kept (the stored object's time).
	Since time.Time
}

// KeptResults lists the results kept in root and not yet delivered,
// oldest first. Pending reports of unfinished attempts are not results
// and are left out.
func (e *Engine) KeptResults(ctx context.Context, root storage.Backend) ([]KeptResult, error) {
	var infos []storage.ObjectInfo
	err := root.List(ctx, reportDir, func(o storage.ObjectInfo) error {
		if strings.HasSuffix(o.Path, ".json") {
			infos = append(infos, o)
		}
		return nil
	})
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("list kept results in %s: %w", root, err)
	}
	var out []KeptResult
	for _, o := range infos {
		data, _, err := root.ReadVersion(ctx, o.Path)
		if err != nil {
			return nil, fmt.Errorf("read kept result %s in %s: %w", o.Path, root, err)
		}
		var r pendingReport
		if data == nil || json.Unmarshal(data, &r) != nil || len(r.Result) == 0 {
			continue // gone since the listing, damaged, or an unfinished attempt's report
		}
		owner := catalog.Owner{PipelineID: r.PipelineID, DestinationID: r.DestinationID}
		if reportPath(r.BundleEventID, owner) != o.Path {
			continue // not where its event and owner put it
		}
		out = append(out, KeptResult{EventID: r.BundleEventID, Owner: owner, Result: r.Result, Since: o.ModTime})
	}
	slices.SortFunc(out, func(a, b KeptResult) int { return a.Since.Compare(b.Since) })
	return out, nil
}
