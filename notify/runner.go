package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/events"
)

// Runner delivers results in serve: one durable JetStream consumer on the
// events stream per target, shared by every serve process, with a few
// workers of its own. It never touches the bundle consumer, so a slow or
// dead receiver holds up only its own target.
type Runner struct {
	JS        jetstream.JetStream
	Subjects  events.Subjects
	Publisher *events.Publisher
	Targets   []*Target
	Options   Options
	Observer  Observer
	Log       zerolog.Logger

	// Workers is how many results one target delivers at once (default
	// DefaultWorkers); Replicas the consumers' replicas (0: the stream's).
	Workers  int
	Replicas int
}

// DefaultWorkers is how many results one target delivers at once.
const DefaultWorkers = 4

// Timing of the consumers.
const (
	ackWait     = 30 * time.Second // a worker says "in progress" every third of it
	fetchWait   = 2 * time.Second
	publishWait = 5 * time.Second
	retryPause  = 500 * time.Millisecond
)

// ConsumerName is the durable consumer of target name of destination:
// "<prefix>-notify-<destination>-<name>". A name has no '-', so no two
// (destination, name) pairs share a consumer.
func ConsumerName(s events.Subjects, destination, name string) string {
	p := s.Prefix
	if p == "" {
		p = events.DefaultPrefix
	}
	return p + "-notify-" + destination + "-" + name
}

// consumerConfig is the durable of t: the result types it wants of its
// destination, from the results published after it was created.
func (r *Runner) consumerConfig(t *Target) jetstream.ConsumerConfig {
	var filters []string
	for _, typ := range t.Config.On {
		filters = append(filters, r.Subjects.ResultFilter(typ, t.Destination.ID, ""))
	}
	return jetstream.ConsumerConfig{
		Durable:        ConsumerName(r.Subjects, t.Destination.ID, t.Name),
		Description:    "distributor serve: notifies " + t.Config.Type + " target " + t.Name + " of destination " + t.Destination.ID,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1, // the target's max_age ends retries
		MaxAckPending:  4 * r.workers(),
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		Replicas:       r.Replicas,
	}
}

func (r *Runner) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return DefaultWorkers
}

// Run delivers until ctx ends, then waits for the attempts under way.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range r.Targets {
		cons := &targetConsumer{r: r, t: t}
		for range r.workers() {
			wg.Go(func() { cons.work(ctx) })
		}
	}
	wg.Wait()
}

// targetConsumer is one target's durable, shared by its workers.
type targetConsumer struct {
	r    *Runner
	t    *Target
	mu   sync.Mutex
	cons jetstream.Consumer
}

// consumer returns the durable, creating it when missing.
func (c *targetConsumer) consumer(ctx context.Context) (jetstream.Consumer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cons != nil {
		return c.cons, nil
	}
	want := c.r.consumerConfig(c.t)
	cons, err := c.r.JS.CreateOrUpdateConsumer(ctx, c.r.Subjects.EventsStream(), want)
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", want.Durable, err)
	}
	c.cons = cons
	return cons, nil
}

// forget drops the durable after NATS said it is gone.
func (c *targetConsumer) forget() {
	c.mu.Lock()
	c.cons = nil
	c.mu.Unlock()
}

// work fetches and delivers one result at a time until ctx ends.
func (c *targetConsumer) work(ctx context.Context) {
	failing := false
	for ctx.Err() == nil {
		err := c.fetchOne(ctx)
		if err == nil || ctx.Err() != nil {
			failing = false
			continue
		}
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrStreamNotFound) {
			c.forget()
		}
		if !failing {
			c.r.Log.Warn().Err(err).Str("destination", c.t.Destination.ID).Str("target", c.t.Name).Msg("notify: cannot fetch results; retrying")
		}
		failing = true
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
}

func (c *targetConsumer) fetchOne(ctx context.Context) error {
	cons, err := c.consumer(ctx)
	if err != nil {
		return err
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(fetchWait))
	if err != nil {
		return err
	}
	for msg := range batch.Messages() {
		c.handle(context.WithoutCancel(ctx), msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// handle makes one attempt: ack on success, ask for the message again
// after the back-off on failure, and report the give-up once max_age
// has passed. The attempt outlives serve's shutdown signal (it is
// bounded by the target's timeout).
func (c *targetConsumer) handle(ctx context.Context, msg jetstream.Msg) {
	t, log := c.t, c.r.Log.With().Str("destination", c.t.Destination.ID).Str("target", c.t.Name).Logger()
	res, err := events.DecodeResult(msg.Data())
	if err != nil {
		log.Warn().Err(err).Msg("notify: skipping a message that is not a result event")
		_ = msg.Term()
		return
	}
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	stop := inProgress(msg)
	err = t.Attempt(ctx, res, msg.Data())
	stop()
	opts := c.r.Options.withDefaults()
	switch {
	case err == nil:
		observe(c.r.Observer, t, OutcomeDelivered, time.Since(res.Time))
		actx, cancel := context.WithTimeout(ctx, publishWait)
		defer cancel()
		if err := msg.DoubleAck(actx); err != nil {
			// NATS may still have the acknowledgement; if not, the
			// message comes back after ackWait and the call repeats.
			log.Warn().Err(err).Str("result", res.ID).Int("attempt", attempt).
				Msgf("notify: delivered, but NATS did not confirm it; the target may be called again with the same %s in up to %s", HeaderEventID, ackWait)
		}
	case t.Expired(res, time.Now()):
		c.giveUp(ctx, msg, res, attempt, err)
	default:
		observe(c.r.Observer, t, OutcomeRetried, 0)
		log.Warn().Err(err).Str("result", res.ID).Int("attempt", attempt).Msg("notify: delivery failed; retrying")
		wait := min(backoff(opts, attempt), time.Until(res.Time.Add(time.Duration(t.Config.MaxAge))))
		_ = msg.NakWithDelay(max(wait, 0))
	}
}

// giveUp publishes the notify_failed event and ends the message; when the
// event cannot be published, the message comes back to try again.
func (c *targetConsumer) giveUp(ctx context.Context, msg jetstream.Msg, res events.Result, attempts int, cause error) {
	t := c.t
	pctx, cancel := context.WithTimeout(ctx, publishWait)
	defer cancel()
	err := c.r.Publisher.PublishNotifyFailed(pctx, events.NotifyFailed{ResultID: res.ID, ResultType: res.Type, PipelineID: res.PipelineID,
		DestinationID: t.Destination.ID, Target: t.Name, TargetType: t.Config.Type, Attempts: attempts, Message: cause.Error()})
	if err != nil {
		c.r.Log.Warn().Err(err).Str("result", res.ID).Msg("notify: cannot publish notify_failed; trying again")
		_ = msg.NakWithDelay(retryPause)
		return
	}
	observe(c.r.Observer, t, OutcomeFailed, 0)
	c.r.Log.Error().Err(cause).Str("destination", t.Destination.ID).Str("target", t.Name).Str("result", res.ID).Int("attempts", attempts).
		Msg("notify: delivery given up after max_age; distributor notify replay --id " + res.ID + " sends it again")
	_ = msg.Term()
}

// inProgress tells NATS the message is being worked on until stop is
// called, so that a long attempt is not delivered to another worker.
func inProgress(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(ackWait / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}
