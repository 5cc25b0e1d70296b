package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

func (a *app) reconcileCommand() *cobra.Command {
	var pipeline, dest string
	var allOwners, refresh, dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "reconcile-state (--pipeline P --destination D | --all-owners [--destination D]) [--refresh] [--dry-run]",
		Short: "Remove catalog records whose bytes are missing and leftovers of interrupted writes; report (or --refresh) size mismatches",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			sel := planner.Selector{AllOwners: allOwners}
			var dests []config.Destination
			switch {
			case allOwners && pipeline != "":
				return usageErr("pass --pipeline with --destination, or --all-owners, not both")
			case allOwners && dest != "":
				d, err := destination(cfg, dest)
				if err != nil {
					return err
				}
				dests = []config.Destination{d}
			case allOwners:
				dests = distinctRoots(cfg.Destinations)
			default:
				if pipeline == "" || dest == "" {
					return usageErr("pass --pipeline P --destination D, or --all-owners")
				}
				d, err := destination(cfg, dest)
				if err != nil {
					return err
				}
				dests = []config.Destination{d}
				sel.Owner = &catalog.Owner{PipelineID: pipeline, DestinationID: dest}
			}
			ctx := cmd.Context()
			s, err := a.directSession(ctx, cfg)
			if err != nil {
				return err
			}
			defer s.close()
			var first error
			reports := []reconcileJSON{}
			for _, d := range dests {
				var res engine.MaintenanceResult
				pctx, done := a.withProgress(ctx, d.ID)
				err := s.runner.WithLease(pctx, d, func(root storage.Backend, l lease.Lease) error {
					var err error
					res, err = s.runner.Engine.Reconcile(pctx, root, l, sel, engine.ReconcileOptions{Refresh: refresh, MaxDeletes: d.MaxDeletes, DryRun: dryRun})
					return err
				})
				done()
				if asJSON {
					reports = append(reports, a.toReconcileJSON(d, res, err))
				}
				if err != nil && !asJSON {
					fmt.Fprintf(a.stdout, "%s: error: %s\n", d.ID, oneLine(err.Error()))
				}
				if err != nil {
					if first == nil {
						first = err
					}
					continue
				}
				if !asJSON {
					a.printReconcile(d, res)
				}
				if !dryRun && (res.Plan.Changed || len(res.Refreshed) > 0) {
					s.report(ctx, a, engine.MaintenanceEvent(events.TypeReconciled, pipeline, d.ID, res))
				}
			}
			if asJSON {
				if err := a.printJSON(reports); err != nil {
					return err
				}
			}
			return first
		},
	}
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "owner pipeline id")
	cmd.Flags().StringVar(&dest, "destination", "", "owner destination id (with --all-owners: the root to repair)")
	cmd.Flags().BoolVar(&allOwners, "all-owners", false, "repair every record in the catalog")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "re-hash size-mismatched outputs and record their current digest and size")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one report per destination as JSON (docs/cli.md)")
	return cmd
}

func (a *app) printReconcile(d config.Destination, res engine.MaintenanceResult) {
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
