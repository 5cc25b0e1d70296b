package local

import (
	"slices"
	"sync"
	"testing"
)

// syncLog records the backend's fsyncs as "kind dir".
type syncLog struct {
	mu  sync.Mutex
	got []string
}

func (l *syncLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	slices.Sort(got)
	return got
}

// newSyncLogged is a backend made with opts on a fresh folder, its fsyncs
// recorded in the log returned.
func newSyncLogged(t *testing.T, opts ...Option) (*Backend, *syncLog) {
	t.Helper()
	l := &syncLog{}
	b := testImpl{opts: append(slices.Clone(opts), withSyncHook(l.add))}.new(t)
	return b, l
}

// add records one fsync.
func (l *syncLog) add(kind, dir string) {
	l.mu.Lock()
	l.got = append(l.got, kind+" "+dir)
	l.mu.Unlock()
}
