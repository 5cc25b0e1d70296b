package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
)

// rootTurns makes the publications of one process into one root take
// turns, in process, before they ask for the root's lease: the second of
// two events for a root waits for the first to end instead of polling a
// held lease (pauses of 50–250 ms, a failed request each), so more
// workers do not mean more lease races. A publication joins its root's
// line when it arrives, or earlier, when its event is delivered (Queue):
// then the line is the order of delivery, whichever worker runs first. A
// turn that ends while another waits may leave its lease to it
// (Service.HandOver). The zero value is ready.
type rootTurns struct {
	mu sync.Mutex
	q  map[string]*turn
}

// turn is one root's line (line[0] holds the turn) and the lease its last
// holder left for the next.
type turn struct {
	line []*seat
	left *holding
}

// seat is a place in a root's line; ready is closed when it holds the
// turn. Under t.mu: arrived: its publication waits for the turn, rather
// than its event being still on the way (opening its bundle, waiting for
// a worker); started: it took the turn; v: the version it publishes, once
// known (Places.note); by: the newer version that passed over it, when
// one did (passed is closed then, and it has left the line).
type seat struct {
	t       *rootTurns
	key     string
	dest    config.Destination // set by Queue
	tu      *turn
	ready   chan struct{}
	passed  chan struct{}
	moved   chan struct{} // the head of the line left it (buffered)
	arrived bool
	started bool
	v       *version
	by      *catalog.Source
}

// join puts a seat at the end of key's line without waiting.
func (t *rootTurns) join(key string) *seat {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.q == nil {
		t.q = map[string]*turn{}
	}
	tu := t.q[key]
	if tu == nil {
		tu = &turn{}
		t.q[key] = tu
	}
	s := &seat{t: t, key: key, tu: tu, ready: make(chan struct{}), passed: make(chan struct{}), moved: make(chan struct{}, 1)}
	if tu.line = append(tu.line, s); len(tu.line) == 1 {
		close(s.ready)
	}
	return s
}

// ahead is who was in front of a seat that gave up waiting: places whose
// publication held or waited for the turn, and places whose events had
// not reached their publication yet (opening their bundles, waiting for a
// handler).
type ahead struct{ publishing, onTheWay int }

// wait waits until the seat holds the turn, as long as the line moves:
// it gives up when the head of the line stayed for patience (a holder, or
// an event on its way, that is stuck), however long the line.
// On false the seat has left the line, and before is who was in front of
// it; by, when set, is the newer version that passed over the seat (then
// it need not run).
func (s *seat) wait(ctx context.Context, patience time.Duration) (ok bool, before ahead, by *catalog.Source) {
	s.t.mu.Lock()
	s.arrived = true
	s.t.mu.Unlock()
	select { // the turn at once: no timer
	case <-s.ready:
		return s.take()
	case <-s.passed:
		return s.take()
	default:
	}
	if patience > 0 {
		timer := time.NewTimer(patience)
		defer timer.Stop()
	waiting:
		for {
			select {
			case <-s.ready:
				return s.take()
			case <-s.passed:
				return s.take()
			case <-s.moved:
				timer.Reset(patience)
			case <-timer.C:
				break waiting
			case <-ctx.Done():
				break waiting
			}
		}
	}
	s.t.mu.Lock()
	for _, o := range s.tu.line {
		if o == s {
			break
		}
		if o.arrived {
			before.publishing++
		} else {
			before.onTheWay++
		}
	}
	by = s.by
	s.t.mu.Unlock()
	s.done(ctx)
	return false, before, by
}

// take takes the turn the seat holds, unless a newer version passed over
// it: a seat passed over may have held the turn before it arrived.
func (s *seat) take() (ok bool, before ahead, by *catalog.Source) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if s.by != nil {
		return false, ahead{}, s.by
	}
	s.started = true
	return true, ahead{}, nil
}

// done leaves the line: the next seat, if any, gets the turn. A lease
// left for a waiter that gave up instead of taking its turn is released
// by the last one out, or when the seat now at the head is one whose
// event has not reached its publication (it would sit idle meanwhile).
func (s *seat) done(ctx context.Context) {
	s.t.mu.Lock()
	tu := s.tu
	i := slices.Index(tu.line, s)
	if i < 0 { // left already: the line may be gone, and key another's
		s.t.mu.Unlock()
		return
	}
	tu.line = slices.Delete(tu.line, i, i+1)
	if i == 0 && len(tu.line) > 0 {
		close(tu.line[0].ready)

		// The line moved. A place behind that gives up waiting is no
		// move: a stuck head keeps everyone behind it waiting patience,
		// once.
		for _, o := range tu.line[1:] {
			select {
			case o.moved <- struct{}{}:
			default:
			}
		}
	}
	var orphan *holding
	if len(tu.line) == 0 {
		delete(s.t.q, s.key)
	}
	if len(tu.line) == 0 || !tu.line[0].arrived {
		orphan, tu.left = tu.left, nil
	}
	s.t.mu.Unlock()
	if orphan != nil {
		_ = orphan.release(context.WithoutCancel(ctx)) // it expires on its own otherwise
	}
}

// leaveLease leaves h to the next seat in the line, if there is one and
// its publication already waits: a lease left for an event still on its
// way would be held idle (and renewed) for as long as that takes, other
// processes shut out of the root.
func (s *seat) leaveLease(h *holding) bool {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if len(s.tu.line) < 2 || !s.tu.line[1].arrived {
		return false
	}
	s.tu.left = h
	return true
}

// pick takes the lease the last holder left, if any.
func (s *seat) pick() *holding {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	h := s.tu.left
	s.tu.left = nil
	return h
}

// Places are an event's places in the lines of its destinations' roots,
// taken when the event is delivered (Service.Queue), so that this
// process's publications into a root run in delivery order even when a
// later event's worker starts first: a producer announcing v1…v8 in a
// burst sees each published, none superseded by a newer one that
// overtook it. Publish uses the place of its destination's root; Release
// gives up the places not used. A nil *Places takes no places: each
// publication joins its root's line when it starts.
type Places struct {
	mu    sync.Mutex
	seats map[string][]*seat // not yet used, by root key, in the order of the destinations
	all   []*seat            // every place taken

	// again: the event is delivered again; an earlier attempt may have
	// published and kept its result, which only its publication recovers.
	again bool

	// running bounds the publications that run at once (nil: no bound).
	running *Running
}

// Running bounds how many publications of a process run at once. A
// publication takes a slot once its root's turn is its own (or it gave up
// waiting for the turn) and gives it back when it ends: events waiting in
// their roots' lines hold none, so many events of a burst can wait, and be
// passed over, at once, while the publications running stay bounded. A nil
// *Running has no bound.
type Running struct{ slots chan struct{} }

// NewRunning bounds the publications running at once to n (at least 1).
func NewRunning(n int) *Running {
	return &Running{slots: make(chan struct{}, max(n, 1))}
}

// run waits for a slot for the places' publication of one destination,
// or for ctx to end; release gives the slot back.
func (p *Places) run(ctx context.Context) (release func(), err error) {
	if p == nil || p.running == nil {
		return func() {}, nil
	}
	select {
	case p.running.slots <- struct{}{}:
		return func() { <-p.running.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliveredAgain marks the places of an event delivered again: they are
// never passed over, nor pass over others.
func (p *Places) deliveredAgain() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.again = true
	p.mu.Unlock()
}

// Queue takes a place for each of dests in its root's line, now, in the
// order of the calls. Every place is used by a Publish of that destination
// with the Places in its Request, or given up with Release.
func (s *Service) Queue(dests []config.Destination) *Places {
	p := &Places{seats: make(map[string][]*seat, len(dests))}
	for _, d := range dests {
		k := d.RootKey()
		st := s.turns.join(k)
		st.dest = d
		p.seats[k] = append(p.seats[k], st)
		p.all = append(p.all, st)
	}
	return p
}

// claim takes the first unused place in key's line, or nil.
func (p *Places) claim(key string) *seat {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ss := p.seats[key]
	if len(ss) == 0 {
		return nil
	}
	p.seats[key] = ss[1:]
	return ss[0]
}

// giveUp gives up the first unused place in key's line: a publication
// that ends before its turn lets the root's line move on at once.
func (p *Places) giveUp(ctx context.Context, key string) {
	if s := p.claim(key); s != nil {
		s.done(ctx)
	}
}

// Keep gives up the places of every destination not in dests (an event
// whose other destinations are done: their roots' lines move on).
func (p *Places) Keep(ctx context.Context, dests []config.Destination) {
	if p == nil {
		return
	}
	want := map[string]int{}
	for _, d := range dests {
		want[d.RootKey()]++
	}
	p.mu.Lock()
	var drop []*seat
	for k, ss := range p.seats {
		if n := want[k]; n < len(ss) {
			drop = append(drop, ss[n:]...)
			p.seats[k] = ss[:n]
		}
	}
	p.mu.Unlock()
	for _, s := range drop {
		s.done(ctx)
	}
}

// Release gives up every place not used.
func (p *Places) Release(ctx context.Context) { p.Keep(ctx, nil) }
