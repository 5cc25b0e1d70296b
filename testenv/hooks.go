package testenv

import (
	"context"

	"github.com/distributor/distributor/storage"
)

// HookedStage runs Hook around each Commit of its Stage: the moment a
// staged object becomes visible. Tests wrap a backend's Stage with it to
// fail, pause or observe that moment.
type HookedStage struct {
	storage.Stage
	Hook func(ctx context.Context, path string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error)
}

// Commit runs Hook with the stage's own Commit.
func (s HookedStage) Commit(ctx context.Context, path string) (storage.ObjectInfo, error) {
	return s.Hook(ctx, path, func() (storage.ObjectInfo, error) { return s.Stage.Commit(ctx, path) })
}

// HookedCatalog runs Hook around the Commit of its PendingCatalog.
type HookedCatalog struct {
	storage.PendingCatalog
	Hook func(ctx context.Context, commit func() (storage.Version, error)) (storage.Version, error)
}

// Commit runs Hook with the pending catalog's own Commit.
func (c HookedCatalog) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	return c.Hook(ctx, func() (storage.Version, error) { return c.PendingCatalog.Commit(ctx, want) })
}
