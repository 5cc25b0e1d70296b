package local

import "testing"

// testImpl is an implementation that tests of behaviour run against: the
// options that make New choose it (testImpls lists them per system).
type testImpl struct {
	name string
	opts []Option
}

// new is a backend of it on a fresh folder.
func (ti testImpl) new(t testing.TB) *Backend {
	t.Helper()
	return ti.at(t, t.TempDir())
}

// at is a backend of it on the folder dir.
func (ti testImpl) at(t testing.TB, dir string) *Backend {
	t.Helper()
	b, err := New(dir, ti.opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eachImpl runs fn in a parallel subtest per implementation.
func eachImpl(t *testing.T, fn func(t *testing.T, ti testImpl)) {
	for _, ti := range testImpls {
		t.Run(ti.name, func(t *testing.T) {
			t.Parallel()
			fn(t, ti)
		})
	}
}

// newBackend is a backend of the system's own implementation on a fresh
// folder.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	return testImpl{}.new(t)
}
