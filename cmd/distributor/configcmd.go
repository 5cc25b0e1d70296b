package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
)

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Configuration commands", Args: noArgs}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate",
		Short: "Check the configuration file and print a summary",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(a.stderr, "distributor: warning: %s\n", w)
			}
			fmt.Fprintf(a.stdout, "%s: ok, %d pipeline(s), %d destination(s)\n", a.configPath, len(cfg.Pipelines), len(cfg.Destinations))
			for _, d := range cfg.Destinations {
				fmt.Fprintf(a.stdout, "  %-20s %-11s %s\n", d.ID, d.Workflow, d.RootKey())
			}
			return nil
		},
	})
	return cmd
}

// optionalConfig loads --config when it was given or the default file
// exists; commands that work without one (bundle verify) get nil.
func (a *app) optionalConfig() *config.Config {
	if _, err := os.Stat(a.configPath); err != nil {
		return nil
	}
	cfg, err := config.Load(a.configPath)
	if err != nil {
		return nil
	}
	return cfg
}
