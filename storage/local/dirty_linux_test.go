package local

import (
	"bytes"
	"strings"
	"testing"

	"github.com/distributor/distributor/storage"
)

// Sync flushes only what is dirty: nothing after nothing, each file alone
// after changes in place and lock writes without a flush (an intent
// emptied, a fingerprint shard rewritten: no syncfs), the root's file
// system after a write or stage with DeferSync.
func TestSyncFlushesOnlyWhatIsDirty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, l := newSyncLogged(t)
	syncfs := func() uint64 { return b.syncCalls.Load() }
	must(t, b.Sync(ctx)) // a fresh root: its reserved folder
	l.take()
	const intent, shard, lock = ".distributor/intent.json", ".distributor/shard", ".distributor/lock"
	v, err := b.WriteIfVersion(ctx, intent, []byte("intent"), "", storage.InPlace)
	must(t, err)
	_, err = b.Put(ctx, shard, bytes.NewReader([]byte("shard")), 5, storage.PutOptions{InPlace: true, DeferSync: true})
	must(t, err)
	must(t, b.Sync(ctx)) // the shard's creation: a new name
	lv, err := b.WriteIfVersion(ctx, lock, []byte("held"), "", storage.DeferSync)
	must(t, err)
	l.take()

	before := syncfs()
	must(t, b.Sync(ctx))
	if got := l.take(); len(got) != 2 || syncfs() != before {
		t.Fatalf("Sync after a lock written without a flush: %q, %d syncfs; want its file and folder alone", got, syncfs()-before)
	}
	must(t, b.Sync(ctx))
	if got := l.take(); len(got) != 0 || syncfs() != before {
		t.Fatalf("Sync with nothing dirty flushed %q, %d syncfs; want nothing", got, syncfs()-before)
	}
	must(t, b.DeleteIfVersion(ctx, intent, v, storage.InPlace, storage.DeferSync))
	_, err = b.Put(ctx, shard, bytes.NewReader([]byte("shard 2")), 7, storage.PutOptions{InPlace: true, DeferSync: true})
	must(t, err)
	must(t, b.DeleteIfVersion(ctx, lock, lv, storage.DeferSync))
	l.take()
	must(t, b.Sync(ctx))
	if got, want := l.take(), []string{"file .distributor", "file .distributor"}; syncfs() != before || len(got) < len(want) || strings.Join(got[:2], ",") != strings.Join(want, ",") {
		t.Fatalf("Sync after an intent emptied, a shard rewritten and the lock removed: %q, %d syncfs; want the two files (and the folder) alone", got, syncfs()-before)
	}

	_, err = b.Put(ctx, "out.txt", strings.NewReader("out"), 3, storage.PutOptions{DeferSync: true})
	must(t, err)
	must(t, b.Sync(ctx))
	if syncfs() != before+1 {
		t.Fatalf("Sync after a Put with DeferSync: %d syncfs, want 1", syncfs()-before)
	}
}
