package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/service"
)

func (a *app) catalogCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "catalog", Short: "Inspect a destination's catalog", Args: noArgs}
	var dest, pipeline, owningDest string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show --destination D [--pipeline P] [--owner-destination D2] [--json]",
		Short: "Print the catalog of a destination's root",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			root, err := a.openDestination(ctx, dest)
			if err != nil {
				return err
			}
			data, v, err := root.ReadVersion(ctx, catalog.FileName)
			if err != nil {
				return err
			}
			if v == "" {
				return fmt.Errorf("%s has no %s yet: nothing has been published there", root, catalog.FileName)
			}
			cat, legacy, err := catalog.Parse(data)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
			}
			if legacy {
				return fmt.Errorf("%s in %s is superseded legacy state (schema_version < 4); the next publication replaces it", catalog.FileName, root)
			}
			sel := cat.Outputs[:0:0]
			for _, o := range cat.Outputs {
				if (pipeline == "" || o.PipelineID == pipeline) && (owningDest == "" || o.DestinationID == owningDest) {
					sel = append(sel, o)
				}
			}
			if asJSON {
				filtered := *cat
				filtered.Outputs = sel
				out, err := catalog.Marshal(&filtered)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(out)
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 2, 2, ' ', 0)

			// SOURCE comes last: it holds a space ("id@created sha256:…").
			fmt.Fprintln(tw, "PATH\tPIPELINE\tDESTINATION\tKIND\tSIZE\tUPDATED\tSOURCE")
			for _, o := range sel {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", escapeControl(o.Path), escapeControl(o.PipelineID), escapeControl(o.DestinationID),
					escapeControl(o.Kind), o.Size, catalog.FormatTime(o.UpdatedAt), escapeControl(service.SourceLabel(o.Source.ID, o.Source.Digest, o.Source.Created)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d of %d output(s); catalog updated %s\n", len(sel), len(cat.Outputs), catalog.FormatTime(cat.UpdatedAt))
			return nil
		},
	}
	show.Flags().StringVar(&dest, "destination", "", "destination whose root to show")
	show.Flags().StringVar(&pipeline, "pipeline", "", "only outputs owned by this pipeline")
	show.Flags().StringVar(&owningDest, "owner-destination", "", "only outputs owned by this destination id (roots can be shared)")
	show.Flags().BoolVar(&asJSON, "json", false, "print the (filtered) catalog as JSON")
	cmd.AddCommand(show)
	return cmd
}
