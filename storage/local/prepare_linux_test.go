package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A version prepared before a Sync is made durable by it: the commit
// flushes the folder only (the rename), not the file. Prepared after the
// last Sync, the commit flushes the file too: durable on return either way.
func TestPreparedVersionFlushesWhatNoSyncCovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		syncAfter bool
		want      []string
	}{
		{"sync between", true, []string{"folder ."}},
		{"no sync since", false, []string{"file .", "folder ."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, l := newSyncLogged(t)
			b.dirty.mark()                      // writes for the Sync to flush
			if err := b.Sync(ctx); err != nil { // a Sync before the prepare covers nothing of it
				t.Fatal(err)
			}
			pv, err := b.prepareBytes(ctx, "cat.json", []byte("v1"))
			if err != nil {
				t.Fatal(err)
			}
			defer pv.Close()
			place(t, pv)
			if got := l.take(); len(got) != 0 {
				t.Fatalf("prepareBytes synced %q, want nothing", got)
			}
			if _, err := os.Stat(filepath.Join(b.root, "cat.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("prepared object visible before its commit: %v", err)
			}
			if c.syncAfter {
				b.dirty.mark() // writes for the Sync to flush
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			v, err := pv.CommitIfVersion(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := l.take(); !slices.Equal(got, c.want) {
				t.Fatalf("commit synced %q, want %q", got, c.want)
			}
			data, rv, err := b.ReadVersion(ctx, "cat.json")
			if err != nil || string(data) != "v1" || rv != v {
				t.Fatalf("after commit: %q version %q (%v); want %q version %q", data, rv, err, "v1", v)
			}
		})
	}
}

// A process killed between the prepare and the commit leaves the old object
// whole and a temp file that the leftover clean-up removes, like a kill
// inside any write. Bytes prepared from a writer (a large catalog, written
// before the publication's intent) have no name until placed: nothing is
// left of them before.
func TestPreparedVersionNeverCommittedIsALeftover(t *testing.T) {
	t.Parallel()
	for _, fromWriter := range []bool{false, true} {
		ctx := context.Background()
		b, _ := newSyncLogged(t)
		if _, err := b.WriteIfVersion(ctx, "cat.json", []byte("v1"), ""); err != nil {
			t.Fatal(err)
		}
		// Killed: neither committed nor closed.
		if fromWriter {
			pv, err := b.prepareStream(ctx, "cat.json", func(w io.Writer) error { _, err := io.WriteString(w, "v2"); return err })
			if err != nil {
				t.Fatal(err)
			}
			if ls, err := b.Leftovers(ctx, time.Now().Add(time.Hour)); err != nil || len(ls) != 0 {
				t.Fatalf("leftovers before Place = %+v (%v), want none", ls, err)
			}
			place(t, pv)
		} else if _, err := b.prepareBytes(ctx, "cat.json", []byte("v2")); err != nil {
			t.Fatal(err)
		}
		leftoverIsRemoved(t, b)
	}
}

// leftoverIsRemoved checks that b holds one leftover, the prepared
// version's, and that removing it leaves v1 whole.
func leftoverIsRemoved(t *testing.T, b *Backend) {
	t.Helper()
	ctx := context.Background()
	if data, _, _ := b.ReadVersion(ctx, "cat.json"); string(data) != "v1" {
		t.Fatalf("object = %q, want the old one whole", data)
	}
	ls, err := b.Leftovers(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 {
		t.Fatalf("leftovers = %+v, want the prepared temp file", ls)
	}
	if err := b.RemoveLeftovers(ctx, ls); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := b.ReadVersion(ctx, "cat.json"); string(data) != "v1" {
		t.Fatalf("object after the clean-up = %q, want v1", data)
	}
}

// place names prepared bytes (Place: what a publication does before its
// Sync).
func place(t *testing.T, pv preparedVersion) {
	t.Helper()
	if err := pv.(*prepared).Place(); err != nil {
		t.Fatal(err)
	}
}

// A Sync that began after the prepare but before Place does not cover the
// bytes' name: the commit fsyncs the file.
func TestPreparedVersionPlacedAfterTheSyncIsFlushedByItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, l := newSyncLogged(t)
	pv, err := b.prepareBytes(ctx, "cat.json", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer pv.Close()
	b.dirty.mark() // writes for the Sync to flush
	must(t, b.Sync(ctx))
	place(t, pv)
	l.take()
	if _, err := pv.CommitIfVersion(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := l.take(), []string{"file .", "folder ."}; !slices.Equal(got, want) {
		t.Fatalf("commit synced %q, want %q", got, want)
	}
}
