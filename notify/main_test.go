package notify_test

import (
	"os"
	"testing"

	"github.com/distributor/distributor/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 4}))
}
