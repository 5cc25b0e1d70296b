package consumer_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// Most tests wait on NATS (redelivery, ack waits, leases, a cluster's fail-over): let more of the waits overlap.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunParallel(m, 8))
}
