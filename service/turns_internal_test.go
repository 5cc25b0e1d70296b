package service

import (
	"context"
	"testing"
	"time"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage/local"
)

// TestALeaseLeftForAPlaceThatLeavesIsNotKeptForOneOnItsWay: A leaves its
// lease to B, whose publication waits; B's wait runs out at that moment
// (its timer wins over the turn) and it leaves the line. The next place,
// C, belongs to an event not yet at its publication: the lease left is
// released, not kept idle (and renewed) for C.
func TestALeaseLeftForAPlaceThatLeavesIsNotKeptForOneOnItsWay(t *testing.T) {
	ctx := context.Background()
	root, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lr := lease.Root{Key: "file://" + root.String(), Store: root}
	l, err := lease.NewStorageLocker("turns-test", time.Minute).Acquire(ctx, lr)
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(ctx)
	h := &holding{l: l, cancel: cancel, since: time.Now()}

	var turns rootTurns
	a, b, c := turns.join(lr.Key), turns.join(lr.Key), turns.join(lr.Key)
	defer c.done(ctx)
	if ok, _, _ := a.wait(ctx, time.Minute); !ok {
		t.Fatal("the first place did not get the turn")
	}
	turns.mu.Lock()
	b.arrived = true // its publication waits for the turn
	turns.mu.Unlock()
	if !a.leaveLease(h) {
		t.Fatal("the lease was not left for a waiting publication")
	}
	b.done(ctx) // its wait ran out as the lease was left
	a.done(ctx)
	other := lease.NewStorageLocker("other-process", time.Minute)
	l2, err := other.Acquire(ctx, lr)
	if err != nil {
		t.Fatalf("the lease is still held for a place whose event has not arrived: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
