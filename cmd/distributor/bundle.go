package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/stores"
)

func (a *app) bundleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bundle", Short: "Create and verify source bundles", Args: noArgs}
	cmd.AddCommand(a.bundleCreateCommand(), a.bundleVerifyCommand())
	return cmd
}

func (a *app) bundleCreateCommand() *cobra.Command {
	var id, created string
	cmd := &cobra.Command{
		Use:   "create DIR --id ID [--created RFC3339]",
		Short: "Write DIR/manifest.json listing every file with its sha256 and size",
		Args:  args(1, "one folder"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := requireFlag("id", id); err != nil {
				return err
			}

			// Milliseconds: versions of a source made one after the other
			// within a second must still be ordered by time (newest wins).
			at := time.Now().UTC().Truncate(time.Millisecond)
			if created != "" {
				t, err := time.Parse(time.RFC3339, created)
				if err != nil {
					return usageErr("--created %q is not an RFC3339 time (e.g. 2026-06-19T12:00:00Z)", created)
				}
				at = t.UTC()
			}

			// A time from the future would pin the source's paths (newest
			// wins): refused before anything is hashed or written.
			if err := bundle.CheckCreated(at, time.Now(), a.optionalConfig().ClockSkew()); err != nil {
				return fmt.Errorf("bundle create %s: %w", argv[0], err)
			}
			ctx, done := a.withProgress(cmd.Context(), "bundle")
			m, data, err := bundle.Create(ctx, argv[0], id, at)
			done()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s/%s: %d files, id %s, digest %s\n", argv[0], bundle.ManifestName, len(m.Files), m.ID, bundle.Digest(data))
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "source id (e.g. weatherreporter.tomorrow)")
	cmd.Flags().StringVar(&created, "created", "", "creation time (RFC3339; default now)")
	return cmd
}

func (a *app) bundleVerifyCommand() *cobra.Command {
	var digest string
	cmd := &cobra.Command{
		Use:   "verify LOCATION",
		Short: "Re-hash every file of a bundle (folder, file:// or s3:// URL) against its manifest",
		Args:  args(1, "one bundle location"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			loc, err := absLocation(argv[0])
			if err != nil {
				return err
			}
			cfg := a.optionalConfig()
			store, err := stores.New(cfg).Bundle(ctx, loc)
			if err != nil {
				return err
			}
			b, err := bundle.Open(ctx, store, loc, digest, cfg.ClockSkew())
			if err != nil {
				return err
			}
			rep, err := b.Verify(ctx)
			for _, p := range rep.Missing {
				fmt.Fprintf(a.stdout, "missing   %s\n", p)
			}
			for _, p := range rep.Mismatched {
				fmt.Fprintf(a.stdout, "damaged   %s\n", p)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "ok: %s (%s), %d files match %s\n", b.Manifest.ID, b.Digest, len(b.Manifest.Files), bundle.ManifestName)
			return nil
		},
	}
	cmd.Flags().StringVar(&digest, "digest", "", "expected manifest digest (sha256:…)")
	return cmd
}
