// Package process answers whether a process id names a running process:
// a lock or an advertisement left by a process that is gone may be taken
// over or ignored. Each system asks its own way (alive_unix.go,
// alive_windows.go); where none can, a process counts as running, the
// answer that never takes a live holder's place.
package process
