package main

// maxrssBytes is the unit of Rusage.Maxrss: bytes on macOS.
const maxrssBytes = 1
