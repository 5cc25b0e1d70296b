//go:build !linux

package local

// testImpls: the portable implementation, the only one here.
var testImpls = []testImpl{{"portable", nil}}

// generalPaths: there is no other path here.
var generalPaths map[string]func(*Backend)
