package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

func (a *app) verifyCommand() *cobra.Command {
	var pipeline, dest string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify --destination D [--pipeline P] [--json]",
		Short: "Re-read stored outputs and compare them with the catalog's sha256 and size (exit 4 on damage); report leftovers of interrupted writes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()

			// Verify only reads (service.Service.Verify).
			cfg, d, err := a.loadDestination(dest)
			if err != nil {
				return err
			}
			if _, ok := cfg.Pipeline(pipeline); pipeline != "" && !ok {
				return usageErr("--pipeline %q: unknown pipeline; %s", pipeline, cfg.KnownPipelines())
			}
			match := func(o catalog.Output) bool {
				return o.DestinationID == dest && (pipeline == "" || o.PipelineID == pipeline)
			}
			svc := &service.Service{Engine: service.NewEngine(version, nil, a.log), Config: cfg, Stores: stores.New(cfg)}
			pctx, done := a.withProgress(ctx, dest)
			rep, err := svc.Verify(pctx, d, match)
			done()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(a.toVerifyJSON(dest, pipeline, rep)); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Missing {
					fmt.Fprintf(a.stdout, "missing  %s\n", p)
				}
				for _, p := range rep.Damaged {
					fmt.Fprintf(a.stdout, "damaged  %s\n", p)
				}
				for _, p := range rep.InFlight {
					fmt.Fprintf(a.stdout, "in flight  %s\n", p)
				}
				inFlight := ""
				if len(rep.InFlight) > 0 {
					inFlight = fmt.Sprintf(", %d in flight", len(rep.InFlight))
				}
				fmt.Fprintf(a.stdout, "%s (%s): %d checked, %d missing, %d damaged%s\n", dest, a.showRoot(rep.Root), rep.Checked, len(rep.Missing), len(rep.Damaged), inFlight)
				if rep.PendingRecovery {
					fmt.Fprintf(a.stdout, "pending recovery: an interrupted publication is not finished yet; the next apply, prune, reconcile-state or serve run on this root finishes it (its outputs show as in flight until then)\n")
				}
				if lo := rep.Leftovers; lo.Count > 0 {
					fmt.Fprintf(a.stdout, "%d leftover(s) of interrupted writes in the root, %d bytes, oldest from %s: reconcile-state removes them\n",
						lo.Count, lo.Bytes, lo.Oldest.Format(time.RFC3339))
				}
			}
			switch {
			case len(rep.Symlinks) > 0:
				return withCode(exitDamaged, fmt.Errorf("verify found outputs that lead through a symlink: %s; do not delete the files the link leads to, which are outside the root (verify again afterwards for other damage)", service.SymlinkFix(a.showRoot(rep.Root), rep.Symlinks)))
			case !rep.OK():
				return withCode(exitDamaged, errors.New("verify found missing or damaged outputs: publish the bundle again to rewrite them (delete a damaged file first if its modification time did not change, as with bitrot), or drop missing ones with reconcile-state"))
			case len(rep.InFlight) > 0:
				return withCode(exitFailed, fmt.Errorf("verify found %d output(s) in flight: a publication is changing them, or was interrupted and waits for the next apply, prune, reconcile-state or serve run on this root; run verify again once it finishes", len(rep.InFlight)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dest, "destination", "", "destination to verify (its outputs in the root)")
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "only outputs of this pipeline")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
