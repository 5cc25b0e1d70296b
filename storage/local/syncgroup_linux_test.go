package local

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// heldSyncs is a syncfs stand-in that counts calls and holds the first one
// until released.
type heldSyncs struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
	err     error
}

func (h *heldSyncs) syncfs(fd int) error {
	if h.calls.Add(1) == 1 {
		close(h.entered)
		<-h.release
	}
	if h.err != nil {
		return h.err
	}
	return unix.Syncfs(fd)
}

// groupOf returns two backends on one filesystem sharing a group whose
// syncfs is h's.
func groupOf(t *testing.T, h *heldSyncs, firstOpts ...Option) (*SyncGroup, []*Backend) {
	g := NewSyncGroup()
	g.syncfs = h.syncfs
	var bs []*Backend
	for i := range 2 {
		opts := []Option{WithSyncGroup(g)}
		if i == 0 {
			opts = append(opts, firstOpts...)
		}
		b, err := New(t.TempDir(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	return g, bs
}

// joined is how many callers wait for the flush after the running one.
func (g *SyncGroup) joined() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.byFS {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.next != nil {
			return s.next.joined
		}
	}
	return 0
}

// TestSyncGroupServesLateCallersWithALaterFlush: roots on one filesystem
// share flushes, and a caller that arrives while a flush runs (it may have
// started before the caller's writes returned) is released only by a flush
// that started after it arrived; every caller that arrived meanwhile
// shares that one.
func TestSyncGroupServesLateCallersWithALaterFlush(t *testing.T) {
	h := &heldSyncs{entered: make(chan struct{}), release: make(chan struct{})}
	g, bs := groupOf(t, h)
	ctx := t.Context()
	first := make(chan error, 1)
	bs[0].dirty.mark() // a write to flush
	go func() { first <- bs[0].Sync(ctx) }()
	<-h.entered // the first flush is running
	const late = 6
	var wg sync.WaitGroup
	servedBy := make([]int32, late)
	for i := range late {
		b := bs[i%2]
		// Each late caller's write returns before its Sync.
		if _, err := b.Put(ctx, fmt.Sprintf("out%d.txt", i), strings.NewReader("x"), 1, storage.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := b.Sync(ctx); err != nil {
				t.Errorf("late Sync: %v", err)
			}
			servedBy[i] = h.calls.Load()
		})
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return g.joined() == late }, "%d callers waiting for the next flush", late)
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	wg.Wait()
	for i, n := range servedBy {
		if n != 2 {
			t.Errorf("late caller %d returned after %d flushes, want 2 (one started after it arrived)", i, n)
		}
	}
	if n := h.calls.Load(); n != 2 {
		t.Fatalf("%d flushes for 1 + %d callers, want 2", n, late)
	}
	// Nothing running: the next caller flushes at once, alone.
	bs[1].dirty.mark()
	if err := bs[1].Sync(ctx); err != nil || h.calls.Load() != 3 {
		t.Fatalf("Sync when idle: %v after %d flushes, want nil after 3", err, h.calls.Load())
	}
}

// TestSyncGroupReportsTheFlushError: every caller a failed flush served
// gets its error; a cancelled waiter returns its context's error without
// stopping the flush the others wait for.
func TestSyncGroupReportsTheFlushError(t *testing.T) {
	h := &heldSyncs{entered: make(chan struct{}), release: make(chan struct{}), err: unix.EIO}
	g, bs := groupOf(t, h)
	first := make(chan error, 1)
	bs[0].dirty.mark() // writes to flush
	go func() { first <- bs[0].Sync(t.Context()) }()
	<-h.entered
	late := make(chan error, 1)
	bs[1].dirty.mark()
	go func() { late <- bs[1].Sync(t.Context()) }()
	cctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan error, 1)
	bs[0].dirty.mark()
	go func() { cancelled <- bs[0].Sync(cctx) }()
	testenv.Eventually(t, 5*time.Second, func() bool { return g.joined() == 2 }, "2 callers waiting")
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	close(h.release)
	for name, ch := range map[string]chan error{"first": first, "late": late} {
		if err := <-ch; !errors.Is(err, unix.EIO) {
			t.Errorf("%s Sync: %v, want EIO", name, err)
		}
	}
	if n := h.calls.Load(); n != 2 {
		t.Fatalf("%d flushes, want 2", n)
	}
}
