//go:build !unix

package main

import (
	"errors"
	"os"
)

// supported reports why the harness cannot run here: it times cp, rsync
// and sh, reads peak memory with getrusage and hands its launcher a
// descriptor (spawn.go), none of which this system has.
func supported() error {
	return errors.New("the harness runs on Linux, macOS and the BSDs only (it times cp and rsync and reads peak memory with getrusage)")
}

func syncAll() {}

func peakRSS(*os.ProcessState) int64 { return 0 }
