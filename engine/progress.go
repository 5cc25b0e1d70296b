package engine

import (
	"context"

	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
)

// WithProgress returns ctx reporting the engine's progress to r: the bundle
// files checked and the outputs written by Publish, the outputs re-read by
// Verify, deleted by Prune and re-hashed by Reconcile.
func WithProgress(ctx context.Context, r progress.Reporter) context.Context {
	return progress.With(ctx, r)
}

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
