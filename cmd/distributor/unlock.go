package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/stores"
)

// unlockJSON is unlock --json.
type unlockJSON struct {
	DestinationID string `json:"destination_id"`
	Root          string `json:"root"`
	RootAsWritten string `json:"root_as_written,omitempty"`
	ID            string `json:"id"`

	// Removed are the lock object and KV lease that had the id; Held
	// those the root still has with another id.
	Removed []lease.Holding `json:"removed"`
	Held    []lease.Holding `json:"held"`
	Error   string          `json:"error,omitempty"`
}

func (a *app) unlockCommand() *cobra.Command {
	var dest, id string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "unlock --destination D --id LOCK_ID [--json]",
		Short: "Break the lock object and lease of a destination's root that a holder left behind, given the id the \"locked by\" error printed",
		Long: `Break the lock object (.distributor/lock in the root) and the NATS lease of a
destination's root, given the lock id that the "locked by …" or "held by …" error
printed. Nothing is removed unless the id matches (exit 3 otherwise). Break a lock
only when its holder is gone: a live holder loses the root and stops at its next
renewal, and its run is retried or must be run again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlag("id", id); err != nil {
				return err
			}
			cfg, d, err := a.loadDestination(dest)
			if err != nil {
				return err
			}
			ctx := cmd.Context()

			// NATS first: when it is configured but does not answer,
			// nothing is removed.
			nc, err := a.connectKnownNATS(cfg)
			switch {
			case errors.Is(err, errNoNATS):
				nc = nil
			case err != nil:
				return err
			default:
				defer nc.Close()
			}
			root, err := stores.New(cfg).Destination(ctx, d)
			if err != nil {
				return err
			}
			rep := unlockJSON{DestinationID: d.ID, Root: root.String(), RootAsWritten: a.rootAsWritten(root.String()), ID: id,
				Removed: []lease.Holding{}, Held: []lease.Holding{}}
			var refusals []error
			note := func(h *lease.Holding, err error) error {
				switch {
				case errors.Is(err, lease.ErrWrongID):
					rep.Held = append(rep.Held, *h)
					refusals = append(refusals, err)
				case err != nil:
					return err
				case h != nil:
					rep.Removed = append(rep.Removed, *h)
				}
				return nil
			}
			if err := note(lease.UnlockObject(ctx, root, id)); err != nil {
				return a.unlockDone(rep, err, asJSON)
			}
			if nc != nil {
				_, streams, err := setupStreams(ctx, nc, cfg, a.log)
				if err != nil {
					return a.unlockDone(rep, err, asJSON)
				}
				if err := note(lease.UnlockKV(ctx, streams.Leases, d.RootKey(), id)); err != nil {
					return a.unlockDone(rep, err, asJSON)
				}
			}
			if len(rep.Removed) == 0 && len(refusals) > 0 {
				// Only another holder's locks: that is not the lock meant.
				refused := refusals[0]
				for _, r := range refusals[1:] {
					refused = fmt.Errorf("%w; %w", refused, r)
				}
				return a.unlockDone(rep, fmt.Errorf("%s (%s) is not locked with id %s: %w", d.ID, a.showRoot(rep.Root), id, refused), asJSON)
			}
			return a.unlockDone(rep, nil, asJSON)
		},
	}
	cmd.Flags().StringVar(&dest, "destination", "", "destination whose root is locked (any destination of that root)")
	cmd.Flags().StringVar(&id, "id", "", "the lock id the \"locked by\" error printed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON (docs/cli.md)")
	return cmd
}

// unlockDone prints what unlock did and returns err.
func (a *app) unlockDone(rep unlockJSON, err error, asJSON bool) error {
	if asJSON {
		if err != nil {
			rep.Error = a.errorLine(err)
		}
		if perr := a.printJSON(rep); perr != nil {
			return perr
		}
		return err
	}
	for _, h := range rep.Removed {
		fmt.Fprintf(a.stdout, "removed the %s of %s (%s): %s\n", kindName(h.Kind), rep.DestinationID, a.showRoot(rep.Root), describeHolding(h))
	}
	if err != nil {
		return err
	}
	for _, h := range rep.Held {
		fmt.Fprintf(a.stdout, "left the %s of %s, id %s: %s\n", kindName(h.Kind), rep.DestinationID, h.ID, describeHolding(h))
	}
	if len(rep.Removed)+len(rep.Held) == 0 {
		fmt.Fprintf(a.stdout, "%s (%s) is not locked: nothing to remove\n", rep.DestinationID, a.showRoot(rep.Root))
	}
	return nil
}

func kindName(kind string) string {
	if kind == lease.KindKVLease {
		return "NATS lease"
	}
	return "lock object"
}

// describeHolding says who held a lock and since when.
func describeHolding(h lease.Holding) string {
	s := "held by " + h.Holder
	if h.Host != "" {
		s += fmt.Sprintf(" (pid %d on %s)", h.PID, h.Host)
	}
	if !h.Acquired.IsZero() {
		s += " since " + h.Acquired.Format(time.RFC3339)
	}
	if !h.Expires.IsZero() {
		s += " until " + h.Expires.Format(time.RFC3339)
	}
	return s
}
