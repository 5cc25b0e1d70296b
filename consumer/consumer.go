// Package consumer is the JetStream pull loop of `distributor serve`: it
// hands each delivery of a bundle-ready message to the service once
// (service.Ledger.Handle), which publishes its event, reports one result
// event per destination and says whether to ack the message, nak it with
// back-off or terminate it; the consumer keeps it ours with heartbeats
// meanwhile and acknowledges it so.
//
// Every serve process shares one durable consumer. service.Classify splits
// errors in two: transient ones (storage or lease unavailable, a full disk,
// a lease held by another live holder, a lost catalog race, a root replaced
// during the publication) are retried with a delay; bad input and states
// only an operator can change (an undecodable event, an unknown pipeline, a
// missing bundle, a digest mismatch, an invalid catalog, a collision, a
// refused plan, a destination root that is gone or not writable) get
// exactly one result event and are terminated, never retried. A bundle
// older than the version of its source a destination already holds is
// reported `superseded` there and acked: newest wins, whatever the arrival
// order. The last allowed delivery
// of a transient failure reports `failed` with reason `max_deliveries`.
// Each destination of an event is reported once (service.Ledger): a
// redelivery runs only the destinations that have no result event yet,
// and a result that could not be published is delivered by a later
// attempt; work abandoned at shutdown is retried, never reported as a
// failure or acked away. A result that can never be published (too
// large), or still cannot be at the last delivery, is replaced by a
// minimal failed/internal one naming the bundle-ready message, and the
// message is terminated: none stays unacknowledged.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
)

// Options tune the consumer. Zero values take the defaults.
type Options struct {
	// Workers is how many publications run at once (default
	// DefaultWorkers); an event waiting for its root's turn takes none.
	Workers int

	// InProcess is how many bundle events this process holds at once,
	// publishing or waiting for their roots' turns (default
	// DefaultInProcessPerWorker × Workers; never fewer than Workers).
	// Waiting events are kept ours with heartbeats, and a newer version
	// of a source waiting beside an older one passes over it
	// (service.PassedOverError): the more of a burst waits at once, the
	// fewer of its versions are published.
	InProcess int

	// MaxDeliver bounds deliveries of one event (default 5).
	MaxDeliver int

	// BackOff is the redelivery delay after attempt n (default 1s, 5s, 15s,
	// 30s, 60s); the last entry repeats.
	BackOff []time.Duration

	// AckWait is how long the server waits for an ack before redelivering
	// (default 30s); heartbeats extend it while work runs.
	AckWait time.Duration

	// Heartbeat is the InProgress interval (default AckWait/3).
	Heartbeat time.Duration

	// ShutdownTimeout bounds how long in-flight work may finish after the
	// context is cancelled (default 30s); then it is abandoned (nak) and the
	// leases are released.
	ShutdownTimeout time.Duration

	// MaxResultBytes bounds an encoded result event (default
	// events.DefaultMaxResultBytes).
	MaxResultBytes int

	// Replicas is how many servers of a NATS cluster keep the durable's
	// state; 0 takes the stream's replicas.
	Replicas int
	Log      zerolog.Logger

	// Observer, when set, is told what happens (serve's metrics).
	Observer Observer

	// SetUp, when set, creates the streams and the lease bucket that are
	// missing (serve's events.Setup). Run runs it, then Durable, whenever
	// it finds one of them or the durable gone from NATS; without it only
	// the durable is recreated.
	SetUp func(ctx context.Context) error

	// CheckEvery is how often Run looks its durable, streams and bucket up
	// besides whenever consuming reports trouble (default
	// DefaultCheckEvery).
	CheckEvery time.Duration

	// KeptSweepEvery is how often the roots are looked through for
	// results an attempt kept because it could not deliver them, from
	// the start of Run (default DefaultKeptSweepEvery; negative: never);
	// those kept more than KeptResultAge ago (default
	// DefaultKeptResultAge) whose event no attempt here is running are
	// delivered (service.Ledger.DeliverKept). The same sweep removes the
	// due retired paths of destinations with retain_previous.
	KeptSweepEvery time.Duration
	KeptResultAge  time.Duration
}

// DefaultKeptSweepEvery and DefaultKeptResultAge: a kept result is
// delivered by the next attempt of its event, which comes within a few
// minutes of NATS coming back (the redelivery back-off); one still there
// after DefaultKeptResultAge has no attempt coming (NATS lost the event).
// A sweep lists one folder per destination root.
const (
	DefaultKeptSweepEvery = 15 * time.Minute
	DefaultKeptResultAge  = 10 * time.Minute
)

// Observer is told what the consumer does. It keeps the consumer free of
// any metrics library: serve's metrics package implements it. Methods must
// be safe for concurrent use and cheap.
type Observer interface {
	// EventStarted and EventDone bracket the handling of one bundle-ready
	// event; attempt is its delivery count (above 1: a redelivery).
	EventStarted(attempt int)
	EventDone()

	// Observe reports what one destination of an event came to.
	Observe(o Observation)

	// Recreated reports that what NATS lacked (the durable, a stream, the
	// lease bucket) was created again.
	Recreated()
}

// Observation is the outcome of one destination of an event.
type Observation struct {
	// Destination is the destination id; "" when the event failed as a
	// whole (an unknown pipeline, an undecodable event).
	Destination string

	// Type is the reported result's type (events.TypePublished, ...), or
	// Retry for a transient failure that is retried.
	Type string

	// Reason is the failed result's reason code.
	Reason string

	// Duration is how long the publication ran; 0 when none ran.
	Duration time.Duration

	// Result is what the engine did.
	Result service.Result

	// LeaseLost: the root's lease was lost during the publication.
	LeaseLost bool
}

// DefaultWorkers is how many bundle events a consumer processes at once
// unless told otherwise. A publication into a local root mostly waits for
// its flushes, which overlap across roots (and share their syncfs), so
// many workers publish more than a few on two cores; the S3 upload memory
// does not grow with them (one budget per process, stores.Opener.S3Budget).
// Events for one root queue in process in delivery order (service.Places),
// and a queued event takes over the lease of the one before it
// (service.HandOver): with more workers than busy roots, most events skip
// the lease's acquisition and release.
const DefaultWorkers = 32

// DefaultInProcessPerWorker: unless told otherwise a consumer holds four
// events per worker. Each event waiting holds its bundle's manifest in
// memory and a heartbeat; a burst of versions of one source spread over
// as many roots as workers still has several of each root's versions
// waiting at once, and all but the newest passed over.
const DefaultInProcessPerWorker = 4

// Retry is Observation.Type of a transient failure that is retried.
const Retry = "retry"

type nopObserver struct{}

func (nopObserver) EventStarted(int)    {}
func (nopObserver) EventDone()          {}
func (nopObserver) Observe(Observation) {}
func (nopObserver) Recreated()          {}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.InProcess <= 0 {
		o.InProcess = DefaultInProcessPerWorker * o.Workers
	}
	o.InProcess = max(o.InProcess, o.Workers)
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = 5
	}
	if len(o.BackOff) == 0 {
		o.BackOff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute}
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = o.AckWait / 3
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = events.DefaultMaxResultBytes
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	if o.KeptSweepEvery == 0 {
		o.KeptSweepEvery = DefaultKeptSweepEvery
	}
	if o.KeptResultAge <= 0 {
		o.KeptResultAge = DefaultKeptResultAge
	}
	return o
}

// Consumer processes bundle-ready events.
type Consumer struct {
	js       jetstream.JetStream
	subjects events.Subjects
	svc      *service.Service
	ledger   *service.Ledger
	opts     Options

	// The durable's settings on the server, which win over opts (an
	// operator may have changed them): set by Durable.
	maxDeliver atomic.Int64
	heartbeat  atomic.Int64 // time.Duration
	warned     atomic.Bool  // the differences were logged

	// durable is the durable consumer Durable set up last: Run consumes
	// from it rather than asking a busy cluster again.
	durable atomic.Pointer[jetstream.Consumer]

	// restoring says what Run is recreating; nil while it consumes.
	restoring atomic.Pointer[string]
	// running counts the attempts in this process by bundle event id:
	// the sweep for kept results leaves theirs to them.
	runningMu sync.Mutex
	running   map[string]int

	// publishing bounds the publications running at once (Workers).
	publishing *service.Running
}

// New returns a consumer. Streams must exist (events.Setup).
func New(js jetstream.JetStream, subjects events.Subjects, svc *service.Service, opts Options) *Consumer {
	opts = opts.withDefaults()
	c := &Consumer{js: js, subjects: subjects, svc: svc, opts: opts, running: map[string]int{}, publishing: service.NewRunning(opts.Workers),
		ledger: service.NewLedger(svc, js, subjects, opts.Log, events.WithMaxResultBytes(opts.MaxResultBytes))}
	c.maxDeliver.Store(int64(opts.MaxDeliver))
	c.heartbeat.Store(int64(opts.Heartbeat))
	return c
}

// Run consumes until ctx is cancelled, then stops fetching, lets in-flight
// work finish within ShutdownTimeout and returns.
func (c *Consumer) Run(ctx context.Context) error {
	var cons jetstream.Consumer
	if set := c.durable.Load(); set != nil {
		cons = *set
	} else {
		var err error
		if cons, err = c.Durable(ctx); err != nil {
			return err
		}
	}

	// Work runs on its own context so that a shutdown lets it finish; it is
	// cancelled only when ShutdownTimeout passes.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	// Long-lived handlers, not a goroutine per message: each new one grew
	// its stack again through the deep publication path, which cost more
	// CPU per event than the hand-over. There is one per event held
	// (InProcess); at most Workers of them publish at once, the others
	// wait for their roots' turns (service.Running). The callback waits
	// for a free handler.
	work, quit := make(chan delivery), make(chan struct{})
	var wg sync.WaitGroup
	for range c.opts.InProcess {
		wg.Go(func() {
			for {
				select {
				case d := <-work:
					c.handle(workCtx, d)
				case <-quit:
					return
				}
			}
		})
	}

	// An error of consuming makes watch look the durable up.
	trouble := make(chan struct{}, 1)
	consume := c.consumer(ctx, workCtx, work, trouble)
	cc, err := consume(cons)
	if err != nil {
		close(quit)
		wg.Wait()
		return fmt.Errorf("consume: %w", err)
	}
	c.opts.Log.Info().Str("consumer", c.subjects.Durable()).Int("workers", c.opts.Workers).Int("in_process", c.opts.InProcess).
		Int64("max_deliver", c.maxDeliver.Load()).Msg("consuming bundle-ready events")
	swept := make(chan struct{})
	go func() { defer close(swept); c.sweepKept(ctx) }()
	cc = c.watch(ctx, cc, consume, trouble)
	<-swept
	cc.Stop()
	<-cc.Closed()

	// Workers finish what they hold, then stop.
	close(quit)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.opts.ShutdownTimeout):
		c.opts.Log.Warn().Dur("timeout", c.opts.ShutdownTimeout).Msg("abandoning in-flight work")
		cancelWork()
		<-done
	}
	return nil
}

// consumer returns what consumes from a durable: its callback hands each
// message to a worker (work) and each error of consuming to trouble.
func (c *Consumer) consumer(ctx, workCtx context.Context, work chan<- delivery, trouble chan<- struct{}) consumeFunc {
	// PullMaxMessages = InProcess: a burst is taken in at once, so its
	// versions wait side by side and all but the newest are passed over
	// (a buffer of Workers took a burst in too slowly for that). An event
	// handed to a handler waits for its root's turn with heartbeats
	// (handle). Messages still buffered by the client have none: their ack
	// clocks run while every handler is busy, which, Workers publishing at
	// once, lasts up to about InProcess/Workers publications' time; past
	// AckWait a message is delivered again (and reported once). The
	// callback sees messages in delivery order: the event takes its places
	// in its roots' lines there, before any handler runs it.
	return func(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
		return cons.Consume(func(msg jetstream.Msg) {
			d := c.deliver(msg)
			select {
			case work <- d:
			case <-ctx.Done():
				// Delivered while stopping, or still waiting for a handler when
				// the stop came (the stop waits for this callback to return
				// before the handlers may quit): another consumer (or the
				// restart) takes it at once.
				d.arrival.Release(workCtx)
				_ = msg.Nak()
			}
		}, jetstream.PullMaxMessages(c.opts.InProcess), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			c.opts.Log.Debug().Err(err).Msg("consume")
			select {
			case trouble <- struct{}{}:
			default:
			}
		}))
	}
}

// sweepKept delivers the kept results no attempt is coming for, at the
// start and every KeptSweepEvery, until ctx ends.
func (c *Consumer) sweepKept(ctx context.Context) {
	if c.opts.KeptSweepEvery < 0 {
		return
	}
	t := time.NewTicker(c.opts.KeptSweepEvery)
	defer t.Stop()
	for {
		n, err := c.ledger.DeliverKept(ctx, c.svc.Config.Destinations, c.opts.KeptResultAge, c.isRunning)
		if err != nil && ctx.Err() == nil {
			c.opts.Log.Warn().Err(err).Int("delivered", n).Msg("could not deliver the results kept in the roots; the next sweep tries again")
		}
		c.sweepRetired(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepRetired removes the due retired paths (retain_previous) of the
// destinations that retain them.
func (c *Consumer) sweepRetired(ctx context.Context) {
	for _, d := range c.svc.Config.Destinations {
		if d.RetainPrevious <= 0 || ctx.Err() != nil {
			continue
		}
		swept, err := c.svc.SweepRetired(ctx, d)
		if err != nil && ctx.Err() == nil {
			c.opts.Log.Warn().Err(err).Str("destination_id", d.ID).Msg("could not remove due retired paths; the next sweep tries again")
		}
		if len(swept) > 0 {
			c.opts.Log.Info().Str("destination_id", d.ID).Int("removed", len(swept)).Msg("removed retired paths past retain_previous")
		}
	}
}

// isRunning reports whether an attempt of the bundle event runs here.
func (c *Consumer) isRunning(eventID string) bool {
	c.runningMu.Lock()
	defer c.runningMu.Unlock()
	return c.running[eventID] > 0
}

// started marks an attempt of the bundle event as running until the
// returned func is called.
func (c *Consumer) started(eventID string) (done func()) {
	c.runningMu.Lock()
	defer c.runningMu.Unlock()
	c.running[eventID]++
	return func() {
		c.runningMu.Lock()
		defer c.runningMu.Unlock()
		if c.running[eventID]--; c.running[eventID] <= 0 {
			delete(c.running, eventID)
		}
	}
}

// delivery is a message as it was delivered: its event decoded (or why
// not) and its places in its roots' lines (service.Ledger.Arrive).
type delivery struct {
	msg     jetstream.Msg
	arrival *service.Arrival
}

// deliver takes msg's places in its roots' lines: called in delivery
// order, it makes this process publish into each root in that order.
func (c *Consumer) deliver(msg jetstream.Msg) delivery {
	return delivery{msg: msg, arrival: c.ledger.Arrive(msg.Data(), c.publishing)}
}

// Handle processes one message to its end: ack, nak with delay or term.
func (c *Consumer) Handle(ctx context.Context, msg jetstream.Msg) {
	c.handle(ctx, c.deliver(msg))
}

// handle is Handle of a delivered message: the service handles it
// (service.Ledger.Handle) while heartbeats keep it ours, and says how to
// acknowledge it.
func (c *Consumer) handle(ctx context.Context, d delivery) {
	msg := d.msg
	m := service.Message{Subject: msg.Subject(), Attempt: 1}
	if md, err := msg.Metadata(); err == nil {
		m.Attempt, m.StoredAt = int(md.NumDelivered), md.Timestamp
		m.Ref = &events.MsgRef{Stream: md.Stream, Seq: md.Sequence.Stream}
	}
	m.Last, m.RetryDelay = c.isLast(m.Attempt), c.backoff(m.Attempt)
	obs := c.opts.Observer
	obs.EventStarted(m.Attempt)
	defer obs.EventDone()
	if id := d.arrival.EventID(); id != "" {
		defer c.started(id)()
	}

	stopBeat := heartbeat(msg, time.Duration(c.heartbeat.Load()))
	a := c.ledger.Handle(ctx, d.arrival, m)
	stopBeat()
	for _, r := range a.Reports {
		o := Observation{Destination: r.Destination, Type: r.Type, Reason: r.Reason, Duration: r.Took, Result: r.Result, LeaseLost: errors.Is(r.Err, lease.ErrLost)}
		if r.Retried {
			o.Type = Retry
		}
		obs.Observe(o)
	}
	switch a.Verdict {
	case service.Nak:
		_ = msg.NakWithDelay(m.RetryDelay)
	case service.Term:
		_ = msg.TermWithReason(a.Why)
	default:
		_ = msg.Ack()
	}
}

func (c *Consumer) backoff(attempt int) time.Duration {
	i := attempt - 1
	if i >= len(c.opts.BackOff) {
		i = len(c.opts.BackOff) - 1
	}
	return c.opts.BackOff[i]
}

// heartbeat tells the server the message is still being worked on, so the
// ack deadline does not pass during long publications.
func heartbeat(msg jetstream.Msg, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}
