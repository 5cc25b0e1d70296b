package testenv

import (
	"flag"
	"strconv"
	"testing"
)

// RunParallel runs m's tests with up to n parallel tests at once unless the
// command line set -parallel itself, and returns m.Run's exit code.
//
// Go's default is GOMAXPROCS, two on the CI machine; a package whose
// tests mostly wait (for a lease's TTL, a cluster's election, a child
// process) finishes sooner when more of those waits overlap. Call it from
// TestMain: os.Exit(testenv.RunParallel(m, 8)).
func RunParallel(m *testing.M, n int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !parallelGiven() {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic("testenv: set -test.parallel: " + err.Error())
		}
	}
	return m.Run()
}

// parallelGiven reports whether -test.parallel was on the command line.
func parallelGiven() bool {
	given := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			given = true
		}
	})
	return given
}
