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

func newSyncLogged(t *testing.T) (*Backend, *syncLog) {
	t.Helper()
	return syncLogged(newBackend(t))
}

// syncLogged has b's fsyncs recorded in the log returned.
func syncLogged(b *Backend) (*Backend, *syncLog) {
	l := &syncLog{}
	b.onSync = func(kind, dir string) {
		l.mu.Lock()
		l.got = append(l.got, kind+" "+dir)
		l.mu.Unlock()
	}
	return b, l
}
