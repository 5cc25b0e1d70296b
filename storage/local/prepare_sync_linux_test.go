package local

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// TestPreparedVersionCountsOnlyASuccessfulSyncBegunAfterIt: the prepared
// bytes count as flushed only by a Sync that began after prepareBytes
// returned and succeeded. One that was running when they were written
// (it may have passed them) and one that failed leave them to the
// commit, which then fsyncs the file before it names it.
func TestPreparedVersionCountsOnlyASuccessfulSyncBegunAfterIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		syncBefore  bool // the Sync begins before the prepare
		err         error
		wantSyncErr bool
		want        []string
	}{
		{"begun before, ended after", true, nil, false, []string{"file .", "folder ."}},
		{"begun after, failed", false, unix.EIO, true, []string{"file .", "folder ."}},
		{"begun after, succeeded", false, nil, false, []string{"folder ."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			h := &heldSyncs{entered: make(chan struct{}), release: make(chan struct{}), err: c.err}
			l := &syncLog{}
			_, bs := groupOf(t, h, withSyncHook(l.add))
			b := bs[0]
			synced := make(chan error, 1)
			if c.syncBefore {
				b.dirty.mark() // writes for the Sync to flush
				go func() { synced <- b.Sync(ctx) }()
				<-h.entered // running: it began before the bytes were written
			}
			pv, err := b.prepareBytes(ctx, "cat.json", []byte("v1"))
			if err != nil {
				t.Fatal(err)
			}
			defer pv.Close()
			place(t, pv)
			if !c.syncBefore {
				b.dirty.mark() // writes for the Sync to flush
				go func() { synced <- b.Sync(ctx) }()
				<-h.entered
			}
			close(h.release)
			if err := <-synced; (err != nil) != c.wantSyncErr {
				t.Fatalf("Sync: %v", err)
			}
			l.take()
			if _, err := pv.CommitIfVersion(ctx, ""); err != nil {
				t.Fatal(err)
			}
			if got := l.take(); !slices.Equal(got, c.want) {
				t.Fatalf("commit synced %q, want %q", got, c.want)
			}
		})
	}
}

// TestSyncGroupReportsAFailedFlushToEveryRootItMayHaveCovered: syncfs
// reports a writeback error once per open file (the kernel's errseq), and
// the group flushes through one handle. A flush that fails may have
// covered the writes of a root whose Sync waits for the next flush (it
// arrived meanwhile) or comes later; that Sync must not succeed as if
// nothing failed (a prepared catalog would be named without its bytes
// being durable), as it would not if the root flushed through its own
// handle. Each root learns of the failure once.
func TestSyncGroupReportsAFailedFlushToEveryRootItMayHaveCovered(t *testing.T) {
	h := &heldSyncs{entered: make(chan struct{}), release: make(chan struct{})}
	g := NewSyncGroup()
	failNext := atomic.Bool{}
	failNext.Store(true)
	g.syncfs = func(fd int) error {
		if err := h.syncfs(fd); err != nil {
			return err
		}
		if failNext.Swap(false) {
			return unix.EIO // as the kernel reports it: once, to this handle
		}
		return nil
	}
	var bs []*Backend
	for range 3 {
		b, err := New(t.TempDir(), WithSyncGroup(g))
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	ctx := t.Context()
	for i, b := range bs { // every root's writes return before the failed flush
		if _, err := b.Put(ctx, fmt.Sprintf("out%d.txt", i), strings.NewReader("x"), 1, storage.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	first := make(chan error, 1)
	bs[0].dirty.mark() // writes for the Sync to flush
	go func() { first <- bs[0].Sync(ctx) }()
	<-h.entered
	late := make(chan error, 1)
	bs[1].dirty.mark() // writes for the Sync to flush
	go func() { late <- bs[1].Sync(ctx) }()
	testenv.Eventually(t, 5*time.Second, func() bool { return g.joined() == 1 }, "1 caller waiting")
	close(h.release)
	if err := <-first; !errors.Is(err, unix.EIO) {
		t.Fatalf("the failed flush's caller: %v, want EIO", err)
	}
	if err := <-late; !errors.Is(err, unix.EIO) {
		t.Fatalf("a root that waited for the next flush: %v, want EIO", err)
	}
	bs[2].dirty.mark() // writes for the Sync to flush
	if err := bs[2].Sync(ctx); !errors.Is(err, unix.EIO) {
		t.Fatalf("a root that flushes after the failure: %v, want EIO", err)
	}
	for i, b := range bs {
		b.dirty.mark() // writes for the Sync to flush
		if err := b.Sync(ctx); err != nil {
			t.Fatalf("root %d, told once already: %v", i, err)
		}
	}
}
