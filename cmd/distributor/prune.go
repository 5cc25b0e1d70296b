package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

func (a *app) pruneCommand() *cobra.Command {
	var pipeline, dest string
	var olderThan config.Duration
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "prune --pipeline P --destination D [--older-than DUR] [--dry-run]",
		Short: "Delete outputs owned by (P, D) not updated within DUR (default: retention.max_age)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlag("pipeline", pipeline); err != nil {
				return err
			}
			if err := requireFlag("destination", dest); err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			d, err := destination(cfg, dest)
			if err != nil {
				return err
			}
			age := time.Duration(d.Retention.MaxAge)
			if cmd.Flags().Changed("older-than") {
				if olderThan <= 0 {
					return usageErr("--older-than %s: give a positive duration such as 720h or 30d", olderThan)
				}
				age = time.Duration(olderThan)
			}
			if age <= 0 {
				return usageErr("destination %q has no retention.max_age: pass --older-than (e.g. 30d)", dest)
			}
			ctx := cmd.Context()
			s, err := a.directSession(ctx, cfg)
			if err != nil {
				return err
			}
			defer s.close()
			owner := catalog.Owner{PipelineID: pipeline, DestinationID: dest}
			cutoff := time.Now().UTC().Truncate(time.Second).Add(-age)
			var res engine.MaintenanceResult
			pctx, done := a.withProgress(ctx, dest)
			err = s.runner.WithLease(pctx, d, func(root storage.Backend, l lease.Lease) error {
				var err error
				res, err = s.runner.Engine.Prune(pctx, root, l, owner, engine.PruneOptions{Cutoff: cutoff, MaxDeletes: d.MaxDeletes, DryRun: dryRun})
				return err
			})
			done()
			verb := "pruned"
			if dryRun {
				verb = "would prune"
			}
			if asJSON {
				root := res.Root
				if root == "" {
					root = d.RootKey()
				}
				out := pruneJSON{PipelineID: pipeline, DestinationID: dest, Root: root, RootAsWritten: a.rootAsWritten(root), DryRun: dryRun,
					OlderThan: config.Duration(age).String(), Cutoff: cutoff, Removed: removedOf(res)}
				if err != nil {
					out.Error = oneLine(err.Error())
				}
				if jerr := a.printJSON(out); jerr != nil {
					return jerr
				}
			}
			for _, o := range res.Plan.Removed {
				if asJSON {
					break
				}
				fmt.Fprintf(a.stdout, "  - %s (updated %s)\n", o.Path, catalog.FormatTime(o.UpdatedAt))
			}
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(a.stdout, "%s %d output(s) of %s in %s older than %s (before %s)\n", verb, len(res.Plan.Removed), owner, a.showRoot(res.Root), config.Duration(age), catalog.FormatTime(cutoff))
			}
			if !dryRun && res.Plan.Changed {
				s.report(ctx, a, engine.MaintenanceEvent(events.TypePruned, pipeline, dest, res))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "owner pipeline id")
	cmd.Flags().StringVar(&dest, "destination", "", "owner destination id")
	cmd.Flags().Var(&olderThan, "older-than", "age cutoff (e.g. 720h, 30d); default retention.max_age")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be deleted, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (docs/cli.md)")
	return cmd
}

// destination looks a destination up, as a usage error when unknown.
func destination(cfg *config.Config, id string) (config.Destination, error) {
	d, ok := cfg.Destination(id)
	if !ok {
		return d, usageErr("unknown destination %q: it is not in the configuration", id)
	}
	return d, nil
}
