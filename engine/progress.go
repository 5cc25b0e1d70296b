package engine

import (
	"context"

	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
)

// startItems begins a progress phase over items (their desired sizes).
func startItems(ctx context.Context, phase string, items []planner.Item, keep func(planner.Item) bool) {
	var n, size int64
	for _, it := range items {
		if keep == nil || keep(it) {
			n++
			size += it.Desired.Size
		}
	}
	progress.Start(ctx, phase, n, size)
}
