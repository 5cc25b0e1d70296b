package events_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
)

// unanswered is a JetStream whose publishes fail with publishErr, and
// whose stream look-up answers streamErr: the two answers a publisher
// gets from a server it cannot publish to.
type unanswered struct {
	jetstream.JetStream
	publishErr, streamErr error
}

func (u unanswered) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return nil, u.publishErr
}

func (u unanswered) Stream(context.Context, string) (jetstream.Stream, error) {
	return nil, u.streamErr
}

func (u unanswered) Conn() *nats.Conn { return nil }

// A result publish that gets no answer, or none in time, says whether the
// stream is missing or has no leader; one that timed out against a stream
// that answers was only slow and says just that.
func TestPublishErrorSaysWhyTheStreamDidNotAnswer(t *testing.T) {
	t.Parallel()
	const leaderless = "stream DISTRIBUTOR_EVENTS does not answer: no JetStream leader answers for it"
	for _, c := range []struct {
		name                  string
		publishErr, streamErr error
		want, notWant         string
	}{
		{"no answer, no stream", jetstream.ErrNoStreamResponse, jetstream.ErrStreamNotFound, "stream DISTRIBUTOR_EVENTS does not exist: start distributor serve once", "does not answer"},
		{"no answer, no leader", jetstream.ErrNoStreamResponse, context.DeadlineExceeded, leaderless, "does not exist"},
		{"timed out, no leader", context.DeadlineExceeded, context.DeadlineExceeded, leaderless, "does not exist"},
		{"nats timeout, no leader", nats.ErrTimeout, context.DeadlineExceeded, leaderless, "does not exist"},
		{"timed out, no stream", context.DeadlineExceeded, jetstream.ErrStreamNotFound, "does not exist", "does not answer"},
		{"timed out, stream answers", context.DeadlineExceeded, nil, "context deadline exceeded", "does not"},
		{"another error", errors.New("permissions violation"), nil, "permissions violation", "does not"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := events.NewPublisher(unanswered{publishErr: c.publishErr, streamErr: c.streamErr}, events.Subjects{})
			_, err := p.PublishResult(context.Background(), published("evt-q", "archive", "weatherreporter.daily"))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.notWant) || !errors.Is(err, c.publishErr) {
				t.Errorf("err = %v, want it to say %q (not %q) and wrap %v", err, c.want, c.notWant, c.publishErr)
			}
		})
	}
}

// counted is an unanswered JetStream that counts publishes.
type counted struct {
	unanswered
	publishes *atomic.Int32
}

func (c counted) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	c.publishes.Add(1)
	return c.unanswered.Publish(ctx, subject, data, opts...)
}

// An announce that gets no answer retries only while the stream has no
// leader: against a missing stream it gives up at once, and against one
// that answers (so no election is under way) after one more attempt.
func TestAnnounceRetriesOnlyWhileTheStreamHasNoLeader(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		streamErr error
		publishes int32
	}{
		{"no stream", jetstream.ErrStreamNotFound, 1},
		{"stream answers", nil, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			js := counted{unanswered{publishErr: jetstream.ErrNoStreamResponse, streamErr: c.streamErr}, new(atomic.Int32)}
			_, _, err := events.NewPublisher(js, events.Subjects{}).AnnounceBundle(context.Background(),
				events.BundleReady{ID: "e", PipelineID: "p", Bundle: "/b", ManifestDigest: digest})
			if !errors.Is(err, jetstream.ErrNoStreamResponse) || js.publishes.Load() != c.publishes {
				t.Fatalf("err = %v after %d publishes, want no answer after %d", err, js.publishes.Load(), c.publishes)
			}
		})
	}
}
