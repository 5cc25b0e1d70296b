//go:build unix && !darwin

package main

// maxrssBytes is the unit of Rusage.Maxrss: KiB on Linux and the BSDs.
const maxrssBytes = 1024
