package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A NATS server restarted without its store (or an operator) may drop
// what serve consumes from: the durable, the streams, the lease bucket.
// Run then looks them up (watch) and, when the server says one is gone,
// recreates them all with the set-up serve runs at start (SetUp) and
// consumes from the new durable (restore).

// Defaults and bounds of the watch.
const (
	// DefaultCheckEvery is Options.CheckEvery's default.
	DefaultCheckEvery = 10 * time.Second

	// minCheckGap is the least time between two look-ups.
	minCheckGap = time.Second

	// checkTimeout bounds one look-up of the durable, streams and bucket:
	// short, as a request sent just before a disconnection gets no answer
	// and the pull after the reconnection reports trouble again.
	checkTimeout = 2 * time.Second

	// restoreAttemptTimeout bounds one attempt of SetUp and Consume.
	restoreAttemptTimeout = 15 * time.Second

	// The back-off of restore's attempts.
	restoreFirstDelay = 250 * time.Millisecond
	restoreMaxDelay   = 10 * time.Second
)

// SetUp creates what is missing of the streams and the lease bucket
// (Options.SetUp) and of the durable (Durable), keeping what exists, and
// returns the durable. Several processes may run it at once: what another
// one created meanwhile is taken as it is.
func (c *Consumer) SetUp(ctx context.Context) (jetstream.Consumer, error) {
	if c.opts.SetUp != nil {
		if err := c.opts.SetUp(ctx); err != nil {
			return nil, err
		}
	}
	return c.Durable(ctx)
}

// Restoring returns what Run is recreating ("" while it consumes): a
// reason for readiness.
func (c *Consumer) Restoring() string {
	if p := c.restoring.Load(); p != nil {
		return *p
	}
	return ""
}

// consumeFunc starts consuming from a durable.
type consumeFunc func(jetstream.Consumer) (jetstream.ConsumeContext, error)

// watch looks the durable, the streams and the bucket up whenever
// consuming reports trouble and every CheckEvery until ctx ends; when one
// is gone it restores them and consumes from the new durable. It returns
// the consume context in use when ctx ends.
func (c *Consumer) watch(ctx context.Context, cc jetstream.ConsumeContext, consume consumeFunc, trouble <-chan struct{}) jetstream.ConsumeContext {
	t := time.NewTicker(c.opts.CheckEvery)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return cc
		case <-trouble:
		case <-t.C:
		}

		// Consuming may report trouble many times a second: one look-up
		// per minCheckGap at most.
		if wait := time.Until(last.Add(minCheckGap)); wait > 0 {
			select {
			case <-ctx.Done():
				return cc
			case <-time.After(wait):
			}
		}
		last = time.Now()

		// Disconnected, a look-up waits its whole timeout; the first pull
		// after the reconnection reports the trouble again.
		if !c.js.Conn().IsConnected() {
			continue
		}
		what := c.missing(ctx)
		if what == "" {
			continue
		}
		cc = c.restore(ctx, what, cc, consume)
	}
}

// missing names the first of the durable, its stream, the events stream
// and the lease bucket that the server says does not exist; "" when all
// do or the server did not answer (nothing is recreated on a guess). The
// events stream and the bucket are looked up only when SetUp can
// recreate them.
func (c *Consumer) missing(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	bundles, durable := c.subjects.BundlesStream(), c.subjects.Durable()
	_, err := c.js.Consumer(ctx, bundles, durable)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return "stream " + bundles
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Sprintf("consumer %s on stream %s", durable, bundles)
	case err != nil || c.opts.SetUp == nil:
		return ""
	}
	if _, err := c.js.Stream(ctx, c.subjects.EventsStream()); errors.Is(err, jetstream.ErrStreamNotFound) {
		return "stream " + c.subjects.EventsStream()
	}
	if _, err := c.js.KeyValue(ctx, c.subjects.LeaseBucket()); errors.Is(err, jetstream.ErrBucketNotFound) {
		return "key-value bucket " + c.subjects.LeaseBucket()
	}
	return ""
}

// restore recreates what is missing (SetUp) and consumes from the new
// durable in place of old, retrying with back-off until it succeeds or
// ctx ends; it returns the consume context in use. An incident logs one
// line when it is found, one at its first failed attempt and one when it
// is over.
func (c *Consumer) restore(ctx context.Context, what string, old jetstream.ConsumeContext, consume consumeFunc) jetstream.ConsumeContext {
	reason := what + " does not exist on NATS; recreating"
	c.restoring.Store(&reason)
	defer c.restoring.Store(nil)
	c.opts.Log.Warn().Str("missing", what).
		Msgf("%s does not exist on NATS (a server restarted without its store, or it was deleted); recreating the streams, the lease bucket and the durable consumer", what)
	delay := restoreFirstDelay
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, restoreAttemptTimeout)
		cons, err := c.SetUp(actx)
		cancel()
		var cc jetstream.ConsumeContext
		if err == nil {
			// The old subscription pulls from a durable that is gone.
			old.Stop()
			<-old.Closed()
			old = stoppedConsume{}
			cc, err = consume(cons)
		}
		if err == nil {
			c.opts.Observer.Recreated()
			c.opts.Log.Info().Str("missing", what).Int("attempt", attempt).Msgf("recreated what NATS lacked (%s); consuming bundle-ready events again", what)
			return cc
		}
		if ctx.Err() != nil {
			return old
		}
		e := c.opts.Log.Debug()
		if attempt == 1 {
			e = c.opts.Log.Warn()
		}
		e.Err(err).Str("missing", what).Int("attempt", attempt).Str("next_delay", delay.String()).Msg("could not recreate what NATS lacks; retrying")
		select {
		case <-ctx.Done():
			return old
		case <-time.After(delay):
		}
		delay = min(2*delay, restoreMaxDelay)
	}
}

// stoppedConsume stands for a consume context restore stopped before a
// new one started.
type stoppedConsume struct{}

func (stoppedConsume) Stop()  {}
func (stoppedConsume) Drain() {}
func (stoppedConsume) Closed() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
