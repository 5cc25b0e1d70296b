package engine_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// Many tests wait on fsync, the S3 server or a lease: let more of the waits overlap.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunParallel(m, 4))
}
