package local

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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
// arrived meanwhile. A backend made with Portable does not use its group:
// its writes are durable on return.
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

	// failures counts the flushes that failed, lastErr is the last one's
	// error: syncfs reports a writeback error once per open file, and the
	// group flushes through one, so the group tells each backend itself
	// (see sync).
	failures uint64
	lastErr  error
}

type syncRound struct {
	done   chan struct{}
	err    error
	joined int // callers waiting for it (tests)
}

// sync makes every write to fd's filesystem that returned before the call
// durable. seen is the caller's count of the failed flushes it was told
// of: a flush that failed since may have covered the caller's writes (it
// arrived while that flush ran, or came later) and the kernel reported its
// error to that flush's callers only, so this call fails too, once, as a
// syncfs through the caller's own handle would.
func (g *SyncGroup) sync(ctx context.Context, fd int, seen *atomic.Uint64) error {
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
		return s.told(r.err, seen)
	}
	if s.next == nil {
		s.next = &syncRound{done: make(chan struct{})}
	}
	r := s.next
	r.joined++
	s.mu.Unlock()
	select {
	case <-r.done:
		return s.told(r.err, seen)
	case <-ctx.Done():
		return ctx.Err() // the flush still runs for the others
	}
}

// told is err, or the error of a flush that failed since the caller last
// learned of one; either way the caller has learned of every failure so
// far.
func (s *fsSync) told(err error, seen *atomic.Uint64) error {
	s.mu.Lock()
	n, last := s.failures, s.lastErr
	s.mu.Unlock()
	if old := seen.Swap(n); err == nil && n > old {
		return fmt.Errorf("an earlier flush of this filesystem failed: %w", last)
	}
	return err
}

// sample sets seen to the failures of fd's filesystem so far.
func (g *SyncGroup) sample(fd int, seen *atomic.Uint64) {
	s, err := g.forFS(fd)
	if err != nil {
		return // sync reports it
	}
	s.mu.Lock()
	seen.Store(s.failures)
	s.mu.Unlock()
}

// run flushes for round r, then starts the round that gathered meanwhile
// (in its own goroutine: r's caller need not wait for it).
func (s *fsSync) run(r *syncRound) {
	if err := s.g.syncfs(s.fd); err != nil {
		r.err = fmt.Errorf("syncfs: %w", err)
	}
	s.mu.Lock()
	if r.err != nil {
		s.failures++
		s.lastErr = r.err
	}
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
