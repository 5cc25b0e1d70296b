package local

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
)

// The portable implementation defers no flush: a write with DeferSync
// flushes its file, its folder and the entries of the folders it made,
// deleteDeferSync the folder that held the file, and a Sync after them
// has nothing left but a folder made without a write below it (the
// lock's).
func TestPortableDefersNoFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newSyncLogged(t, Portable())
	if _, err := b.Put(ctx, "a/b.txt", strings.NewReader("b"), 1, storage.PutOptions{DeferSync: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := l.take(), []string{"file a", "folder .", "folder a"}; !slices.Equal(got, want) {
		t.Fatalf("Put with DeferSync flushed %q, want %q", got, want)
	}
	must(t, b.Delete(ctx, "a/b.txt", "c.txt"))
	if got, want := l.take(), []string{"folder ."}; !slices.Equal(got, want) {
		t.Fatalf("deleteDeferSync flushed %q, want %q (a, emptied, is gone)", got, want)
	}
	// The lock's folder, made by a compare-and-swap that wrote nothing.
	must(t, b.DeleteIfVersion(ctx, ".distributor/lock", "", storage.DeferSync))
	if got := l.take(); len(got) != 0 {
		t.Fatalf("a compare-and-swap that changed nothing flushed %q", got)
	}
	must(t, b.Sync(ctx))
	if got, want := l.take(), []string{"folder ."}; !slices.Equal(got, want) {
		t.Fatalf("Sync flushed %q, want %q (the entry of .distributor)", got, want)
	}
	must(t, b.Sync(ctx))
	if got := l.take(); len(got) != 0 {
		t.Fatalf("a second Sync flushed %q, want nothing", got)
	}
}
