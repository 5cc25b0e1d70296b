package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/storage/probe"
	"github.com/distributor/distributor/stores"
)

// doctorJSON is doctor --json.
type doctorJSON struct {
	Destinations []doctorDestination `json:"destinations"`
	OK           bool                `json:"ok"`
	Error        string              `json:"error,omitempty"`
}

// doctorDestination is what doctor found in one destination's root.
type doctorDestination struct {
	DestinationID string        `json:"destination_id"`
	Root          string        `json:"root"`
	RootAsWritten string        `json:"root_as_written,omitempty"`
	Backend       string        `json:"backend"`
	OK            bool          `json:"ok"`
	Checks        []probe.Check `json:"checks"`
	Error         string        `json:"error,omitempty"`
}

func (a *app) doctorCommand() *cobra.Command {
	var dests []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--destination D] [--json]",
		Short: "Check that each destination's storage keeps what distributor relies on (permissions, conditional writes under a race, aborted uploads, clock, file system calls)",
		Long: `Check, on scratch objects under each root's .distributor/ area (removed
afterwards), what distributor relies on: read, write, list and delete
permissions; If-None-Match and If-Match honoured, and atomic under a race of
8 writers; an aborted multipart upload leaves nothing (S3); the server's clock
within max_clock_skew (S3); rename, link and fsync (local roots). One line per
check; exit 1 when a check fails.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			selected := cfg.Destinations
			if len(dests) > 0 {
				selected = nil
				for _, id := range dests {
					d, err := destination(cfg, id)
					if err != nil {
						return err
					}
					selected = append(selected, d)
				}
			}
			rep := doctorJSON{Destinations: []doctorDestination{}, OK: true}
			for _, d := range selected {
				dd := a.doctorDestination(cmd.Context(), cfg, d, probe.Options{Races: true})
				rep.OK = rep.OK && dd.OK
				rep.Destinations = append(rep.Destinations, dd)
			}
			return a.doctorDone(rep, asJSON)
		},
	}
	cmd.Flags().StringArrayVar(&dests, "destination", nil, "only this destination (repeatable; default: every destination)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON (docs/cli.md)")
	return cmd
}

// doctorDestination opens d's root and runs the checks on it.
func (a *app) doctorDestination(ctx context.Context, cfg *config.Config, d config.Destination, opts probe.Options) doctorDestination {
	dd := doctorDestination{DestinationID: d.ID, Backend: d.Backend, Checks: []probe.Check{}}
	opts.MaxClockSkew = cfg.ClockSkew()
	opts.Now = a.clock
	root, err := stores.New(cfg).Destination(ctx, d)
	if err != nil {
		dd.Error = a.errorLine(err)
		return dd
	}
	dd.Root, dd.RootAsWritten = root.String(), a.rootAsWritten(root.String())
	dd.Checks = probe.Backend(ctx, root, opts)
	if d.Backend == config.BackendLocal {
		dd.Checks = append(dd.Checks, probe.Folder(d.Path)...)
	}
	failed, _ := probe.Failed(dd.Checks)
	dd.OK = !failed
	return dd
}

// doctorDone prints the checks and returns the error that sets the exit
// code: 1 when any check failed or a root could not be opened.
func (a *app) doctorDone(rep doctorJSON, asJSON bool) error {
	var bad []string
	for _, d := range rep.Destinations {
		if !d.OK {
			bad = append(bad, d.DestinationID)
		}
	}
	var err error
	if len(bad) > 0 {
		err = withCode(exitFailed, fmt.Errorf("the storage of %v does not keep what distributor relies on (see the ✖ lines)", bad))
	}
	if asJSON {
		if err != nil {
			rep.Error = a.errorLine(err)
		}
		if perr := a.printJSON(rep); perr != nil {
			return perr
		}
		return err
	}
	for _, d := range rep.Destinations {
		fmt.Fprintf(a.stdout, "%s (%s)\n", d.DestinationID, a.showRoot(d.Root))
		if d.Error != "" {
			fmt.Fprintf(a.stdout, "  ✖ open: %s\n", d.Error)
		}
		for _, c := range d.Checks {
			if c.OK {
				fmt.Fprintf(a.stdout, "  ✔ %s: %s\n", c.Name, c.Detail)
				continue
			}
			fmt.Fprintf(a.stdout, "  ✖ %s: %s: %s\n", c.Name, c.Detail, c.Consequence)
		}
	}
	return err
}

// doctorAtStart runs the cheap checks (no races) on every destination
// and logs a warning naming doctor for each one that fails.
func (a *app) doctorAtStart(ctx context.Context, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, doctorAtStartTimeout)
	defer cancel()
	for _, d := range cfg.Destinations {
		dd := a.doctorDestination(ctx, cfg, d, probe.Options{})
		if dd.Error != "" {
			a.log.Warn().Str("destination", d.ID).Msgf("storage check: cannot open the root: %s; run `distributor doctor --destination %s`", dd.Error, d.ID)
		}
		for _, c := range dd.Checks {
			if !c.OK {
				a.log.Warn().Str("destination", d.ID).Str("check", c.Name).Bool("fence", c.Fence).
					Msgf("storage check %s failed: %s: %s; run `distributor doctor --destination %s`", c.Name, c.Detail, c.Consequence, d.ID)
			}
		}
	}
}

// doctorAtStartTimeout bounds serve's start-up checks.
const doctorAtStartTimeout = 30 * time.Second
