package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/metrics"
	"github.com/distributor/distributor/notify"
	"github.com/distributor/distributor/service"
)

// startNotify starts serve's delivery to the notify targets, when any is
// configured: one durable consumer per target, beside the bundle
// consumer. wait returns once the deliveries under way have ended.
func (a *app) startNotify(ctx context.Context, cfg *config.Config, js jetstream.JetStream, streams *events.Streams, m *metrics.Metrics) (wait func(), err error) {
	if !cfg.HasNotify() {
		return func() {}, nil
	}
	targets, err := notify.Targets(ctx, cfg, notify.Options{})
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	names := map[string][]string{}
	for _, t := range targets {
		names[t.Destination.ID] = append(names[t.Destination.ID], t.Name)
	}
	m.NotifyTargets(names)
	r := &notify.Runner{JS: js, Subjects: streams.Subjects, Publisher: events.NewPublisher(js, streams.Subjects), Targets: targets,
		Observer: m, Log: a.log, Replicas: cfg.NATS.Replicas}
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	return wg.Wait, nil
}

// notifyInline delivers each destination's result to its notify targets
// in this process (apply without NATS), within ctx's deadline. A delivery
// that fails is logged; the publication stands.
func (a *app) notifyInline(ctx context.Context, done []service.Done, req service.Request, digest string) {
	for _, d := range done {
		if len(d.Destination.Notify) == 0 {
			continue
		}
		r := service.ResultEvent(d.Destination.ID, d.Result, d.Err, req.Direct(digest))
		r.SchemaVersion, r.Time, r.ID = events.SchemaVersion, a.clock().UTC(), events.ResultMsgID(r)
		targets, err := notify.DestinationTargets(ctx, d.Destination, notify.Options{})
		if err != nil {
			a.log.Warn().Err(err).Msg("notify: not delivered")
			continue
		}
		body, err := r.Encode()
		if err != nil {
			a.log.Warn().Err(err).Msg("notify: not delivered")
			continue
		}
		_ = a.deliverAll(ctx, targets, r, body) // deliverAll logs each failure
	}
}

// deliverAll delivers r to the targets that want it, at once, and
// returns the first failure.
func (a *app) deliverAll(ctx context.Context, targets []*notify.Target, r events.Result, body []byte) error {
	var wg sync.WaitGroup
	errs := make([]error, len(targets))
	for i, t := range targets {
		if !t.Config.Wants(r.Type) {
			continue
		}
		wg.Go(func() {
			n, err := notify.Deliver(ctx, t, r, body, notify.Options{}, nil)
			if err != nil {
				a.log.Warn().Err(err).Str("destination", t.Destination.ID).Str("target", t.Name).Str("result", r.ID).Msg("notify: not delivered")
				errs[i] = err
				return
			}
			a.log.Info().Str("destination", t.Destination.ID).Str("target", t.Name).Str("result", r.ID).Int("attempts", n).Msg("notify: delivered")
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (a *app) notifyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Deliver results to a destination's notify targets again",
		Args:  noArgs,
	}
	cmd.AddCommand(a.notifyReplayCommand())
	return cmd
}

func (a *app) notifyReplayCommand() *cobra.Command {
	var id, target string
	timeout := config.Duration(time.Minute)
	cmd := &cobra.Command{
		Use:   "replay --id RESULT_ID [--target NAME]",
		Short: "Send a stored result event to its destination's notify targets again (e.g. after a notify_failed event)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlag("id", id); err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErr("--timeout %s: must be positive", timeout)
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Duration(timeout))
			defer cancel()
			return a.notifyReplay(ctx, cfg, id, target)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the result event's id (a notify_failed event's result_id)")
	cmd.Flags().StringVar(&target, "target", "", "only this notify target of the destination (its name)")
	cmd.Flags().Var(&timeout, "timeout", "how long to keep trying, e.g. 5m")
	return cmd
}

// notifyReplay finds the result id in the events stream and delivers it
// to its destination's targets that want its type (or to target).
func (a *app) notifyReplay(ctx context.Context, cfg *config.Config, id, target string) error {
	nc, streams, err := a.readStreams(ctx, cfg)
	if errors.Is(err, errNoNATS) {
		return usageErr("notify replay reads the result from NATS: set nats.url or start distributor serve")
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	var found *events.Stored
	err = events.ReadResults(ctx, streams.Events, []string{streams.Subjects.ResultFilter("", "", "")}, func(s events.Stored) error {
		if s.ID == id {
			found = &s
		}
		return nil
	})
	if err != nil {
		return err
	}
	if found == nil {
		return withCode(exitUsage, fmt.Errorf("no result event with id %q in stream %s: give a result's id (distributor history, or a notify_failed event's result_id)", id, streams.Subjects.EventsStream()))
	}
	d, ok := cfg.Destination(found.DestinationID)
	if !ok || len(d.Notify) == 0 {
		return withCode(exitUsage, fmt.Errorf("result %s is of destination %q, which has no notify targets in this configuration", id, found.DestinationID))
	}
	targets, err := notify.DestinationTargets(ctx, d, notify.Options{})
	if err != nil {
		return withCode(exitUsage, err)
	}
	var chosen []*notify.Target
	for _, t := range targets {
		if target == "" && t.Config.Wants(found.Type) || t.Name == target {
			chosen = append(chosen, t)
		}
	}
	if len(chosen) == 0 {
		return withCode(exitUsage, fmt.Errorf("destination %s has no notify target named %q that takes %s results", d.ID, target, found.Type))
	}
	msg, err := streams.Events.GetMsg(ctx, found.Seq)
	if err != nil {
		return fmt.Errorf("read result %s: %w", id, err)
	}
	if err := a.deliverAll(ctx, chosen, found.Result, msg.Data); err != nil {
		return err
	}
	for _, t := range chosen {
		fmt.Fprintf(a.stdout, "%s: delivered %s to %s\n", d.ID, id, t.Name)
	}
	return nil
}
