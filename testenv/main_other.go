//go:build !linux

package testenv

// memoryTempDir returns "": a memory filesystem for the tests' folders is
// looked for on Linux only (/dev/shm), elsewhere they stay in the default
// temporary folder.
func memoryTempDir() string { return "" }
