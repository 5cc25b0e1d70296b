package local

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
)

func put(t *testing.T, b *Backend, p string, opts storage.PutOptions) {
	t.Helper()
	if _, err := b.Put(context.Background(), p, strings.NewReader(p), int64(len(p)), opts); err != nil {
		t.Fatal(err)
	}
}

func TestDurablePutSyncsTheParentsOfTheFoldersItMade(t *testing.T) {
	t.Parallel()
	b, l := newSyncLogged(t)
	put(t, b, "a/b/c.txt", storage.PutOptions{})
	// The file, its folder, and the entries of a/b (in a) and of a (in the root).
	want := []string{"file a/b", "folder .", "folder a", "folder a/b"}
	if got := l.take(); !slices.Equal(got, want) {
		t.Fatalf("first write into new folders synced %q, want %q", got, want)
	}
	put(t, b, "a/b/d.txt", storage.PutOptions{})
	if got, want := l.take(), []string{"file a/b", "folder a/b"}; !slices.Equal(got, want) {
		t.Fatalf("second write into the same folder synced %q, want %q", got, want)
	}
}

func TestSyncCoversTheFoldersDeferredWritesMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newSyncLogged(t)
	put(t, b, "x/y.txt", storage.PutOptions{DeferSync: true})
	if got := l.take(); len(got) != 0 {
		t.Fatalf("deferred write synced %q, want nothing", got)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// syncfs flushed x's entry: a durable write in x no longer syncs the root.
	put(t, b, "x/z.txt", storage.PutOptions{})
	if got, want := l.take(), []string{"file x", "folder x"}; !slices.Equal(got, want) {
		t.Fatalf("durable write after Sync synced %q, want %q", got, want)
	}
}

func TestReservedFolderMadeByTheLockIsSyncedByTheFirstDurableWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newSyncLogged(t)
	v, err := b.WriteIfVersion(ctx, ".distributor/lock", []byte("a"), "", storage.DeferSync)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.take(); len(got) != 0 {
		t.Fatalf("WriteIfVersionNoSync synced %q, want nothing", got)
	}
	if err := b.DeleteIfVersion(ctx, ".distributor/lock", v, storage.DeferSync); err != nil {
		t.Fatal(err)
	}
	if got := l.take(); len(got) != 0 {
		t.Fatalf("DeleteIfVersionNoSync synced %q, want nothing", got)
	}
	if _, v, err := b.ReadVersion(ctx, ".distributor/lock"); err != nil || v != "" {
		t.Fatalf("lock after DeleteIfVersionNoSync: version %q, %v; want gone", v, err)
	}
	if _, err := b.WriteIfVersion(ctx, ".distributor/intent.json", []byte("{}"), ""); err != nil {
		t.Fatal(err)
	}
	want := []string{"file .distributor", "folder .", "folder .distributor"}
	if got := l.take(); !slices.Equal(got, want) {
		t.Fatalf("first durable write in .distributor synced %q, want %q", got, want)
	}
}
