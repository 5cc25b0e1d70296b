package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Linux carries a process's peak RSS across exec(2), and Go starts a child
// with vfork semantics: a command the harness starts inherits the
// harness's own peak (hundreds of MB once it has written a big catalog) as
// its getrusage peak. So each timed command is started by a launcher, this
// binary again with spawnEnv set, whose own peak is a few MB; it times the
// command and reports its wall time and peak RSS on descriptor 3.
const spawnEnv = "DISTRIBUTOR_BENCH_SPAWN"

// spawnMain is the launcher: it runs os.Args[1:] and exits with its code.
func spawnMain() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = slices.DeleteFunc(os.Environ(), func(s string) bool { return strings.HasPrefix(s, spawnEnv+"=") })
	start := time.Now()
	err := cmd.Run()
	secs := time.Since(start).Seconds()
	rss := peakRSS(cmd.ProcessState)
	report := os.NewFile(3, "report")
	fmt.Fprintf(report, "%f %d\n", secs, rss)
	report.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// spawned runs cmd (whose Path and Args are the command) through the
// launcher and returns the command's wall time and peak RSS (KiB).
func spawned(cmd *exec.Cmd) (float64, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd.Args = append([]string{self}, cmd.Args...)
	cmd.Path = self
	cmd.Env = append(cmd.Env, spawnEnv+"=1")
	r, w, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, 0, err
	}
	out, rerr := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		return 0, 0, err
	}
	if rerr != nil {
		return 0, 0, rerr
	}
	var secs float64
	var rss int64
	if _, err := fmt.Sscan(string(out), &secs, &rss); err != nil {
		return 0, 0, fmt.Errorf("launcher report %q: %w", out, err)
	}
	return secs, rss, nil
}
