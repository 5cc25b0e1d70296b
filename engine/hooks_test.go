package engine_test

import (
	"context"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// hookedStage is testenv.HookedStage, shorter.
func hookedStage(s storage.Stage, hook func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error)) storage.Stage {
	return testenv.HookedStage{Stage: s, Hook: hook}
}
