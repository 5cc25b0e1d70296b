package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoStreams: the streams named by a Subjects do not exist yet (no
// `serve` has run against this NATS).
var ErrNoStreams = errors.New("distributor's streams do not exist")

// Open returns the streams and the lease bucket that exist, creating and
// changing nothing: for commands that only read (status, history). The
// events stream must exist (ErrNoStreams otherwise); a missing bundles
// stream or lease bucket is left nil.
func Open(ctx context.Context, js jetstream.JetStream, s Subjects) (*Streams, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	st := &Streams{Subjects: s}
	var err error
	st.Events, err = js.Stream(ctx, s.EventsStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: stream %s is not there: start `distributor serve` once (it creates the streams)", ErrNoStreams, s.EventsStream())
	}
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", s.EventsStream(), err)
	}
	st.Bundles, err = js.Stream(ctx, s.BundlesStream())
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("open stream %s: %w", s.BundlesStream(), err)
	}
	st.Leases, err = js.KeyValue(ctx, s.LeaseBucket())
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open key-value bucket %s: %w", s.LeaseBucket(), err)
	}
	return st, nil
}
