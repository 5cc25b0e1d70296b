package engine

import (
	"context"
	"sync"
	"time"
)

// rootTurns makes the publications of one process into one root take
// turns in arrival order, in process, before they ask for the root's
// lease: the second of two events for a root waits for the first to end
// instead of polling a held lease (pauses of 50–250 ms, a failed request
// each), so more workers do not mean more lease races. The zero value is
// ready.
type rootTurns struct {
	mu sync.Mutex
	q  map[string]*turn
}

// turn is one root's token (a channel of one: its waiters queue in order)
// and how many hold or wait for it.
type turn struct {
	token chan struct{}
	users int
}

// take waits until key's turn is free, up to deadline, and returns its
// release; ok is false when the deadline or ctx ended the wait first.
func (t *rootTurns) take(ctx context.Context, key string, deadline time.Time) (release func(), ok bool) {
	t.mu.Lock()
	if t.q == nil {
		t.q = map[string]*turn{}
	}
	tu := t.q[key]
	if tu == nil {
		tu = &turn{token: make(chan struct{}, 1)}
		t.q[key] = tu
	}
	tu.users++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if tu.users--; tu.users == 0 {
			delete(t.q, key)
		}
		t.mu.Unlock()
	}
	select { // free at once: no timer
	case tu.token <- struct{}{}:
		return func() { <-tu.token; leave() }, true
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		leave()
		return nil, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case tu.token <- struct{}{}:
		return func() { <-tu.token; leave() }, true
	case <-timer.C:
	case <-ctx.Done():
	}
	leave()
	return nil, false
}
