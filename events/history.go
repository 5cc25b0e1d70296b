package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stored is a result event as the events stream holds it.
type Stored struct {
	Result

	// Seq is the message's sequence in the events stream.
	Seq uint64
}

// ReadResults passes the result events stored on subjects (filters such as
// Subjects.ResultFilter) to fn, oldest first, and returns once it has
// caught up with what the stream held when it started. Messages that do
// not decode as result events are skipped. It only reads: the ordered
// consumer it uses is ephemeral.
func ReadResults(ctx context.Context, st jetstream.Stream, subjects []string, fn func(Stored) error) error {
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("read the events stream: %w", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("read %s: %w", info.Config.Name, err)
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return fmt.Errorf("read %s: %w", info.Config.Name, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("read %s: %w", info.Config.Name, err)
			}
			if r, err := DecodeResult(msg.Data()); err == nil {
				if err := fn(Stored{Result: r, Seq: md.Sequence.Stream}); err != nil {
					return err
				}
			}
			if md.NumPending == 0 || md.Sequence.Stream >= last {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("read %s: %w", info.Config.Name, err)
		}
		if n == 0 {
			return nil
		}
	}
}

// History returns the result events of one destination (and of one
// pipeline, unless pipeline is ""), newest first: at most limit of them
// (0: all that the stream keeps). It reads the destination's events once,
// from the oldest stored.
func History(ctx context.Context, st jetstream.Stream, s Subjects, destination, pipeline string, limit int) ([]Stored, error) {
	// A ring of the newest limit events seen so far.
	var ring []Stored
	next := 0
	err := ReadResults(ctx, st, []string{s.ResultFilter("", destination, pipeline)}, func(r Stored) error {
		if limit <= 0 || len(ring) < limit {
			ring = append(ring, r)
			return nil
		}
		ring[next] = r
		next = (next + 1) % limit
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Stored, 0, len(ring))
	for i := range ring {
		// Newest first: the one before next, going back.
		out = append(out, ring[(next-1-i+2*len(ring))%len(ring)])
	}
	return out, nil
}
