package testenv_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

// The cluster tests wait on elections and restarts: let the waits overlap.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8}))
}
