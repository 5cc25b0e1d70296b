package main

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// Many tests wait on NATS, S3, child processes or a lease: let more of the waits overlap.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunParallel(m, 8))
}
