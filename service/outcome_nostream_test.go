package service_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
)

// TestNoResponseFromStreamIsRetried: a lease request that meets its
// bucket's stream between leaders ("no response from stream") is
// retried, as other NATS timeouts are, not reported failed.
func TestNoResponseFromStreamIsRetried(t *testing.T) {
	err := fmt.Errorf("acquire lease on file:///r/ in bucket DISTRIBUTOR_LEASES: %w", jetstream.ErrNoStreamResponse)
	if o := service.Classify(err); !o.Retry || o.Type != events.TypeFailed || o.Reason != events.ReasonStorage {
		t.Fatalf("Classify(%v) = %+v, want a retried storage failure", err, o)
	}
}
