package testenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// MainOptions tunes a package's test run; see Main.
type MainOptions struct {
	// Parallel is how many parallel tests run at once unless the command
	// line sets -parallel. Go's default is GOMAXPROCS, two on the CI
	// machine; a package whose tests mostly wait (a lease's TTL, a
	// cluster's election, a child process) finishes sooner when more of
	// those waits overlap. 0 keeps Go's default.
	Parallel int

	// TempInMemory puts the tests' temporary folders (t.TempDir) on the
	// memory filesystem /dev/shm (Linux only), unless TMPDIR is set or
	// /dev/shm is not a tmpfs with room. The local backend fsyncs every
	// write and syncs the whole filesystem per publication; on a shared
	// disk those waits
	// were most of the engine's test time. The assertions do not depend
	// on the disk (no test cuts the power); storage/local's own tests stay
	// on the disk's filesystem, and so does a run with -bench.
	TempInMemory bool
}

// Main runs m as o says and returns m.Run's exit code; call it from
// TestMain: os.Exit(testenv.Main(m, testenv.MainOptions{...})).
func Main(m *testing.M, o MainOptions) int {
	if spec := os.Getenv(natsChildEnv); spec != "" {
		return runNATSChild(spec) // a server for NewNATSProcess, not a test run
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	if o.Parallel > 0 && !flagGiven("test.parallel") {
		if err := flag.Set("test.parallel", strconv.Itoa(o.Parallel)); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: set -test.parallel:", err)
			return 2
		}
	}

	// Benchmarks measure the disk the product writes to: never in memory.
	if o.TempInMemory && !benchmarking() {
		if dir := memoryTempDir(); dir != "" {
			defer os.RemoveAll(dir)

			// Child processes of the tests inherit it as well.
			if err := os.Setenv("TMPDIR", dir); err != nil {
				fmt.Fprintln(os.Stderr, "testenv: set TMPDIR:", err)
				return 2
			}
		}
	}
	return m.Run()
}

// benchmarking reports whether -test.bench asks for any benchmark.
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// flagGiven reports whether the flag name was on the command line.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}
