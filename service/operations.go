package service

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// The engine's reports, options and refusals as the service's callers see
// them: the service is the one package above the engine.
type (
	Result            = engine.Result
	SupersededError   = engine.SupersededError
	MaintenanceResult = engine.MaintenanceResult
	PruneOptions      = engine.PruneOptions
	ReconcileOptions  = engine.ReconcileOptions
	VerifyReport      = engine.VerifyReport
	LeftoverReport    = engine.LeftoverReport
	RootStatus        = engine.RootStatus
	SourceStatus      = engine.SourceStatus
	StatusOptions     = engine.StatusOptions
	CatalogSummaries  = engine.CatalogSummaries
	KeptResult        = engine.KeptResult
)

var (
	// ErrCollision: desired paths exist as unmanaged content.
	ErrCollision = engine.ErrCollision

	// ErrSuperseded: the destination holds a newer version of the source.
	ErrSuperseded = engine.ErrSuperseded
)

// DefaultLeftoverAge is how long an interrupted write's leftover stays
// untouched before it is removed.
const DefaultLeftoverAge = engine.DefaultLeftoverAge

// SymlinkFix says what to do about outputs that lead through a symlink.
func SymlinkFix(root string, links []string) string { return engine.SymlinkFix(root, links) }

// NewEngine is the engine a Service runs its operations with: version is
// written into catalogs, now is the clock (nil: time.Now), log is the
// logger for lines no context carries one for.
func NewEngine(version string, now func() time.Time, log zerolog.Logger) *engine.Engine {
	return &engine.Engine{Version: version, Now: now, Log: log}
}

// Status reads what d's root holds, and the results kept in it, without a
// lease or a write.
func (s *Service) Status(ctx context.Context, d config.Destination, opts StatusOptions) (RootStatus, []KeptResult, error) {
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return RootStatus{}, nil, err
	}
	st, err := s.Engine.Status(ctx, root, opts)
	var kept []KeptResult
	if err == nil {
		kept, err = s.Engine.KeptResults(ctx, root)
	}
	if st.Root == "" {
		st.Root = root.String()
	}
	return st, kept, err
}

// Verify re-reads the outputs of d's root that match selects and compares
// them with the catalog, without a lease or a write.
func (s *Service) Verify(ctx context.Context, d config.Destination, match func(catalog.Output) bool) (VerifyReport, error) {
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return VerifyReport{}, err
	}
	return s.Engine.Verify(ctx, root, match)
}

// Prune removes owner's outputs in d's root that opts selects, under the
// root's lease.
func (s *Service) Prune(ctx context.Context, d config.Destination, owner catalog.Owner, opts PruneOptions) (MaintenanceResult, error) {
	return s.maintain(ctx, d, func(ctx context.Context, root storage.Backend, l lease.Lease) (MaintenanceResult, error) {
		return s.Engine.Prune(ctx, root, l, owner, opts)
	})
}

// SweepRetired removes the retired paths of d's root that are due
// (retain_previous), under the root's lease, taken only when one is due.
func (s *Service) SweepRetired(ctx context.Context, d config.Destination) ([]string, error) {
	root, err := s.Stores.Destination(ctx, d)
	if err != nil {
		return nil, err
	}
	if due, err := s.Engine.RetiredDue(ctx, root); err != nil || !due {
		return nil, err
	}
	var swept []string
	err = s.WithLease(ctx, d, func(root storage.Backend, l lease.Lease) error {
		swept, err = s.Engine.SweepRetired(ctx, root, l)
		return err
	})
	return swept, err
}

// Reconcile brings the catalog of d's root in line with what it stores
// (the records sel selects), under the root's lease.
func (s *Service) Reconcile(ctx context.Context, d config.Destination, sel planner.Selector, opts ReconcileOptions) (MaintenanceResult, error) {
	return s.maintain(ctx, d, func(ctx context.Context, root storage.Backend, l lease.Lease) (MaintenanceResult, error) {
		return s.Engine.Reconcile(ctx, root, l, sel, opts)
	})
}

// maintain runs a maintenance step on d's root under its lease.
func (s *Service) maintain(ctx context.Context, d config.Destination, step func(context.Context, storage.Backend, lease.Lease) (MaintenanceResult, error)) (MaintenanceResult, error) {
	var res MaintenanceResult
	err := s.WithLease(ctx, d, func(root storage.Backend, l lease.Lease) error {
		var err error
		res, err = step(ctx, root, l)
		return err
	})
	return res, err
}
