package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

func (a *app) verifyCommand() *cobra.Command {
	var pipeline, dest string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify --destination D [--pipeline P] [--json]",
		Short: "Re-read stored outputs and compare them with the catalog's sha256 and size (exit 4 on damage); report leftovers of interrupted writes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			ctx := cmd.Context()
			s, err := a.directSession(ctx, cfg)
			if err != nil {
				return err
			}
			defer s.close()
			match := func(o catalog.Output) bool {
				return o.DestinationID == dest && (pipeline == "" || o.PipelineID == pipeline)
			}
			var rep engine.VerifyReport
			err = s.runner.WithLease(ctx, d, func(root storage.Backend, l lease.Lease) error {
				// An interrupted publication would show its landed writes
				// as damaged: finish its bookkeeping first.
				if _, err := s.runner.Engine.Recover(ctx, root, l); err != nil {
					return err
				}
				var err error
				rep, err = s.runner.Engine.Verify(ctx, root, match)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Missing {
					fmt.Fprintf(a.stdout, "missing  %s\n", p)
				}
				for _, p := range rep.Damaged {
					fmt.Fprintf(a.stdout, "damaged  %s\n", p)
				}
				fmt.Fprintf(a.stdout, "%s (%s): %d checked, %d missing, %d damaged\n", dest, rep.Root, rep.Checked, len(rep.Missing), len(rep.Damaged))
				if lo := rep.Leftovers; lo.Count > 0 {
					fmt.Fprintf(a.stdout, "%d leftover(s) of interrupted writes in the root, %d bytes, oldest from %s: reconcile-state removes them\n",
						lo.Count, lo.Bytes, lo.Oldest.Format(time.RFC3339))
				}
			}
			if !rep.OK() {
				return withCode(exitDamaged, errors.New("verify found missing or damaged outputs: delete the damaged files and publish the bundle again (missing outputs are rewritten), or drop missing ones with reconcile-state"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dest, "destination", "", "destination to verify (its outputs in the root)")
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "only outputs of this pipeline")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
