package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
)

// reconcileOptions are reconcile-state's flags.
type reconcileOptions struct {
	pipeline, dest                     string
	allOwners, refresh, dryRun, asJSON bool
}

func (a *app) reconcileCommand() *cobra.Command {
	var o reconcileOptions
	cmd := &cobra.Command{
		Use:   "reconcile-state (--pipeline P --destination D | --all-owners [--destination D]) [--refresh] [--dry-run]",
		Short: "Remove catalog records whose bytes are missing and leftovers of interrupted writes; report (or --refresh) size mismatches",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.reconcile(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.pipeline, "pipeline", "", "owner pipeline id")
	cmd.Flags().StringVar(&o.dest, "destination", "", "owner destination id (with --all-owners: the root to repair)")
	cmd.Flags().BoolVar(&o.allOwners, "all-owners", false, "repair every record in the catalog")
	cmd.Flags().BoolVar(&o.refresh, "refresh", false, "re-hash size-mismatched outputs and record their current digest and size")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "report, change nothing")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print one report per destination as JSON (docs/cli.md)")
	return cmd
}

// reconcile repairs the catalog of every selected root, each under its
// lease; the first failure decides the exit code, the others still run.
func (a *app) reconcile(ctx context.Context, o reconcileOptions) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	sel, dests, err := reconcileSelection(cfg, o)
	if err != nil {
		return err
	}
	s, err := a.directSession(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	var first error
	reports := []reconcileJSON{}
	for _, d := range dests {
		res, err := s.maintain(ctx, a, d, func(ctx context.Context) (service.MaintenanceResult, error) {
			return s.svc.Reconcile(ctx, d, sel, service.ReconcileOptions{Refresh: o.refresh, MaxDeletes: d.MaxDeletes, DryRun: o.dryRun})
		})
		if o.asJSON {
			reports = append(reports, a.toReconcileJSON(d, res, err))
		}
		if err != nil && !o.asJSON {
			fmt.Fprintf(a.stdout, "%s: error: %s\n", d.ID, oneLine(err.Error()))
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if !o.asJSON {
			a.printReconcile(d, res)
		}
		if !o.dryRun && (res.Plan.Changed || len(res.Refreshed) > 0) {
			s.report(ctx, a, service.MaintenanceEvent(events.TypeReconciled, o.pipeline, d.ID, res))
		}
	}
	if o.asJSON {
		if err := a.printJSON(reports); err != nil {
			return err
		}
	}
	return first
}

// reconcileSelection is what reconcile-state repairs: the records of one
// owner in its destination's root, or every record in one root or all.
func reconcileSelection(cfg *config.Config, o reconcileOptions) (planner.Selector, []config.Destination, error) {
	sel := planner.Selector{AllOwners: o.allOwners}
	switch {
	case o.allOwners && o.pipeline != "":
		return sel, nil, usageErr("pass --pipeline with --destination, or --all-owners, not both")
	case o.allOwners && o.dest != "":
		d, err := destination(cfg, o.dest)
		if err != nil {
			return sel, nil, err
		}
		return sel, []config.Destination{d}, nil
	case o.allOwners:
		return sel, distinctRoots(cfg.Destinations), nil
	default:
		if o.pipeline == "" || o.dest == "" {
			return sel, nil, usageErr("pass --pipeline P --destination D, or --all-owners")
		}
		d, err := destination(cfg, o.dest)
		if err != nil {
			return sel, nil, err
		}
		sel.Owner = &catalog.Owner{PipelineID: o.pipeline, DestinationID: o.dest}
		return sel, []config.Destination{d}, nil
	}
}

func (a *app) printReconcile(d config.Destination, res service.MaintenanceResult) {
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(a.stdout, "%s (%s): %s %d record(s) whose bytes are missing, %d size mismatch(es)\n",
		d.ID, a.showRoot(res.Root), verb, len(res.Plan.Removed), len(res.Plan.SizeMismatches))
	for _, o := range res.Plan.Removed {
		fmt.Fprintf(a.stdout, "  - %s (missing)\n", o.Path)
	}
	if lo := res.Leftovers; lo.Count > 0 {
		fmt.Fprintf(a.stdout, "%s (%s): %s %d leftover(s) of interrupted writes, %d bytes\n", d.ID, a.showRoot(res.Root), verb, lo.Count, lo.Bytes)
	}
	refreshed := map[string]bool{}
	for _, o := range res.Refreshed {
		refreshed[o.Path] = true
	}
	for _, p := range res.Plan.SizeMismatches {
		note := "size differs; --refresh records the current bytes"
		if refreshed[p] {
			note = "size differed; refreshed"
		}
		fmt.Fprintf(a.stdout, "  ! %s (%s)\n", p, note)
	}
}

// distinctRoots keeps the first destination of every root.
func distinctRoots(ds []config.Destination) []config.Destination {
	seen := map[string]bool{}
	var out []config.Destination
	for _, d := range ds {
		if !seen[d.RootKey()] {
			seen[d.RootKey()] = true
			out = append(out, d)
		}
	}
	return out
}
