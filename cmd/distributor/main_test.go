package main

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// Many tests wait on NATS, S3, child processes, leases and the local
// backend's fsyncs: overlap the waits, keep temporary folders in memory.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8, TempInMemory: true}))
}
