package engine_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// The tests wait on the local backend's fsyncs (hence temporary folders in
// memory), the S3 server and leases: let more of the waits overlap.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 4, TempInMemory: true}))
}
