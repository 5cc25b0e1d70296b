package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
)

// durableConfig is the shared durable as the options configure it.
func (c *Consumer) durableConfig() jetstream.ConsumerConfig {
	// Operator requests come on their own subject; Handle tells them apart.
	return jetstream.ConsumerConfig{
		Durable:        c.subjects.Durable(),
		Description:    "distributor serve: publishes bundle-ready events",
		FilterSubjects: []string{c.subjects.BundleReadyFilter(""), c.subjects.AdminBundleReadyFilter("")},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.opts.AckWait,
		MaxDeliver:     c.opts.MaxDeliver,
		MaxAckPending:  1000,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		Replicas:       c.opts.Replicas,
	}
}

// Durable creates the shared durable pull consumer when it is missing. One
// that exists keeps its settings, which an operator may have changed: a
// difference is logged, and the consumer works by the server's max
// deliveries and ack wait. Only the filter subjects distributor must
// receive are added when they are missing.
func (c *Consumer) Durable(ctx context.Context) (jetstream.Consumer, error) {
	want := c.durableConfig()
	stream := c.subjects.BundlesStream()
	cons, err := c.js.Consumer(ctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = c.js.CreateConsumer(ctx, stream, want)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			// Another serve created it meanwhile, with its settings.
			cons, err = c.js.Consumer(ctx, stream, want.Durable)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create consumer %s on %s: %w", want.Durable, stream, err)
	}
	have := cons.CachedInfo().Config
	filters := slices.Clone(have.FilterSubjects)
	if have.FilterSubject != "" {
		filters = append(filters, have.FilterSubject)
	}
	if missing := events.MissingSubjects(filters, want.FilterSubjects); len(missing) > 0 {
		upd := have
		upd.FilterSubject, upd.FilterSubjects = "", append(filters, missing...)
		if cons, err = c.js.UpdateConsumer(ctx, stream, upd); err != nil {
			return nil, fmt.Errorf("add the subjects distributor must receive (%v) to consumer %s on %s: %w", missing, want.Durable, stream, err)
		}
		c.opts.Log.Warn().Str("consumer", want.Durable).Strs("added_subjects", missing).
			Msgf("consumer %s lacked filter subjects distributor must receive; added %v (nothing else changed)", want.Durable, missing)
	}
	if !c.warned.Swap(true) { // Run calls Durable again after a caller did
		events.WarnDifferences(c.opts.Log, ConsumerDifferences("consumer "+want.Durable, have, want))
	}
	c.adopt(have)
	c.durable.Store(&cons)
	return cons, nil
}

// adopt makes the consumer work by the durable's settings on the server:
// the last delivery is the server's last, and heartbeats come often enough
// for its ack wait.
func (c *Consumer) adopt(server jetstream.ConsumerConfig) {
	c.maxDeliver.Store(int64(server.MaxDeliver))
	beat := c.opts.Heartbeat
	if server.AckWait > 0 {
		beat = min(beat, server.AckWait/3)
	}
	c.heartbeat.Store(int64(beat))
}

// isLast reports whether delivery attempt is the last the server makes
// (never, when the durable allows unlimited deliveries).
func (c *Consumer) isLast(attempt int) bool {
	m := c.maxDeliver.Load()
	return m > 0 && int64(attempt) >= m
}

// ConsumerDifferences compares the durable's settings an operator may tune.
func ConsumerDifferences(resource string, server, configured jetstream.ConsumerConfig) []events.Difference {
	var d []events.Difference
	add := func(setting, s, c string) {
		if s != c {
			d = append(d, events.Difference{Resource: resource, Setting: setting, Server: s, Configured: c})
		}
	}
	deliveries := func(n int) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.Itoa(n)
	}
	add("max_deliver", deliveries(server.MaxDeliver), deliveries(configured.MaxDeliver))
	add("ack_wait", events.FormatDuration(server.AckWait), events.FormatDuration(configured.AckWait))

	// 0 replicas follows the stream's: compared only when both are set.
	if server.Replicas > 0 && configured.Replicas > 0 {
		add("replicas", strconv.Itoa(server.Replicas), strconv.Itoa(configured.Replicas))
	}
	return d
}
