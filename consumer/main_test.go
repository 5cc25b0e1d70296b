package consumer_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// Most tests wait on NATS (redelivery, ack waits, leases, a cluster's
// fail-over) and on the local backend's fsyncs: overlap the waits, keep
// temporary folders in memory.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8, TempInMemory: true}))
}
