package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
)

// pruneOptions are prune's flags.
type pruneOptions struct {
	pipeline, dest string
	olderThan      config.Duration
	olderThanSet   bool // --older-than was given (else retention.max_age)
	dryRun, asJSON bool
}

func (a *app) pruneCommand() *cobra.Command {
	var o pruneOptions
	cmd := &cobra.Command{
		Use:   "prune --pipeline P --destination D [--older-than DUR] [--dry-run]",
		Short: "Delete outputs owned by (P, D) not updated within DUR (default: retention.max_age)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.olderThanSet = cmd.Flags().Changed("older-than")
			return a.prune(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.pipeline, "pipeline", "", "owner pipeline id")
	cmd.Flags().StringVar(&o.dest, "destination", "", "owner destination id")
	cmd.Flags().Var(&o.olderThan, "older-than", "age cutoff (e.g. 720h, 30d); default retention.max_age")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "list what would be deleted, change nothing")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON (docs/cli.md)")
	return cmd
}

// prune deletes (P, D)'s outputs older than the cutoff, under the lease.
func (a *app) prune(ctx context.Context, o pruneOptions) error {
	if err := requireFlag("pipeline", o.pipeline); err != nil {
		return err
	}
	cfg, d, err := a.loadDestination(o.dest)
	if err != nil {
		return err
	}
	age, err := pruneAge(d, o)
	if err != nil {
		return err
	}
	s, err := a.directSession(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	owner := catalog.Owner{PipelineID: o.pipeline, DestinationID: o.dest}
	cutoff := a.clock().UTC().Truncate(time.Second).Add(-age)
	res, err := s.maintain(ctx, a, d, func(ctx context.Context) (service.MaintenanceResult, error) {
		return s.svc.Prune(ctx, d, owner, service.PruneOptions{Cutoff: cutoff, MaxDeletes: d.MaxDeletes, DryRun: o.dryRun})
	})
	if o.asJSON {
		if jerr := a.printPruneJSON(d, o, age, cutoff, res, err); jerr != nil {
			return jerr
		}
	} else {
		for _, out := range res.Plan.Removed {
			fmt.Fprintf(a.stdout, "  - %s (updated %s)\n", out.Path, catalog.FormatTime(out.UpdatedAt))
		}
	}
	if err != nil {
		return err
	}
	if !o.asJSON {
		verb := "pruned"
		if o.dryRun {
			verb = "would prune"
		}
		fmt.Fprintf(a.stdout, "%s %d output(s) of %s in %s older than %s (before %s)\n", verb, len(res.Plan.Removed), owner, a.showRoot(res.Root), config.Duration(age), catalog.FormatTime(cutoff))
	}
	if !o.dryRun && res.Plan.Changed {
		s.report(ctx, a, service.MaintenanceEvent(events.TypePruned, o.pipeline, o.dest, res))
	}
	return nil
}

// pruneAge is the age past which prune deletes: --older-than, else the
// destination's retention.max_age.
func pruneAge(d config.Destination, o pruneOptions) (time.Duration, error) {
	age := time.Duration(d.Retention.MaxAge)
	if o.olderThanSet {
		if o.olderThan <= 0 {
			return 0, usageErr("--older-than %s: give a positive duration such as 720h or 30d", o.olderThan)
		}
		age = time.Duration(o.olderThan)
	}
	if age <= 0 {
		return 0, usageErr("destination %q has no retention.max_age: pass --older-than (e.g. 30d)", o.dest)
	}
	return age, nil
}

// printPruneJSON prints the result of prune (err: its failure) as JSON.
func (a *app) printPruneJSON(d config.Destination, o pruneOptions, age time.Duration, cutoff time.Time, res service.MaintenanceResult, err error) error {
	root := res.Root
	if root == "" {
		root = d.RootKey()
	}
	out := pruneJSON{PipelineID: o.pipeline, DestinationID: o.dest, Root: root, RootAsWritten: a.rootAsWritten(root), DryRun: o.dryRun,
		OlderThan: config.Duration(age).String(), Cutoff: cutoff, Removed: removedOf(res)}
	if err != nil {
		out.Error = a.errorLine(err)
	}
	return a.printJSON(out)
}
