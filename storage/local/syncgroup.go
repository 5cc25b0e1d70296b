package local

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// SyncGroup lets the backends that share it (the roots of one process)
// share their syncfs(2) barriers: group commit. syncfs flushes a whole
// filesystem, so one call can stand for every caller whose writes had
// returned before it started; concurrent publications into different
// roots on one filesystem then wait for one flush instead of queueing a
// flush each. A caller that arrives while a flush is running waits for the
// next one (the running one may have started before its writes), which
// starts as soon as the running one ends and serves every caller that
// arrived meanwhile.
type SyncGroup struct {
	mu   sync.Mutex
	byFS map[uint64]*fsSync
	// syncfs is unix.Syncfs (tests count and hold the calls).
	syncfs func(fd int) error
}

// NewSyncGroup returns an empty group.
func NewSyncGroup() *SyncGroup {
	return &SyncGroup{byFS: map[uint64]*fsSync{}, syncfs: unix.Syncfs}
}

// fsSync is the group's state for one filesystem.
type fsSync struct {
	g  *SyncGroup
	fd int // a handle on the filesystem, the group's own (dup'ed)
	mu sync.Mutex
	// running is the flush in progress (nil: none); next is the one that
	// starts when it ends, joined by every caller that arrives meanwhile.
	running, next *syncRound
}

type syncRound struct {
	done   chan struct{}
	err    error
	joined int // callers waiting for it (tests)
}

// sync makes every write to fd's filesystem that returned before the call
// durable.
func (g *SyncGroup) sync(ctx context.Context, fd int) error {
	s, err := g.forFS(fd)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.running == nil {
		r := &syncRound{done: make(chan struct{})}
		s.running = r
		s.mu.Unlock()
		s.run(r) // in this caller: no hand-off when nobody else waits
		return r.err
	}
	if s.next == nil {
		s.next = &syncRound{done: make(chan struct{})}
	}
	r := s.next
	r.joined++
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err() // the flush still runs for the others
	}
}

// run flushes for round r, then starts the round that gathered meanwhile
// (in its own goroutine: r's caller need not wait for it).
func (s *fsSync) run(r *syncRound) {
	if err := s.g.syncfs(s.fd); err != nil {
		r.err = fmt.Errorf("syncfs: %w", err)
	}
	s.mu.Lock()
	close(r.done)
	s.running, s.next = s.next, nil
	next := s.running
	s.mu.Unlock()
	if next != nil {
		go s.run(next)
	}
}

// forFS returns the state of fd's filesystem, made on first use with a
// handle of its own that lives as long as the group (one per filesystem).
func (g *SyncGroup) forFS(fd int) (*fsSync, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.byFS[st.Dev]; s != nil {
		return s, nil
	}
	own, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	s := &fsSync{g: g, fd: own}
	g.byFS[st.Dev] = s
	return s, nil
}
