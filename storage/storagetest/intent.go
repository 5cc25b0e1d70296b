package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/distributor/distributor/storage"
)

// wantIntent checks ReadIntent: data (nil: none) and, with data, version v.
func wantIntent(t *testing.T, b storage.Backend, data []byte, v storage.Version) {
	t.Helper()
	got, gotV, err := b.ReadIntent(t.Context())
	if err != nil {
		t.Fatalf("ReadIntent: %v", err)
	}
	if data == nil {
		if got != nil {
			t.Fatalf("ReadIntent = %q, %q; want nil bytes (no intent)", got, gotV)
		}
		return
	}
	if !bytes.Equal(got, data) || gotV != v {
		t.Fatalf("ReadIntent = %q, %q; want %q, %q", got, gotV, data, v)
	}
}

// The intent is written only where none is, read back with the version
// WriteIntent returned, and cleared only at that version.
func testIntent(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	wantIntent(t, b, nil, "")
	if err := b.SyncIntent(ctx); err != nil {
		t.Fatalf("SyncIntent on a fresh root: %v", err)
	}
	first := []byte(`{"intent":"first, the longest of them","sum":"1"}`)
	second := []byte(`{"intent":"second","sum":"2"}`)
	v1, err := b.WriteIntent(ctx, first)
	if err != nil || v1 == "" {
		t.Fatalf("WriteIntent on a fresh root = %q, %v; want a version", v1, err)
	}

	// The version ReadIntent returns is WriteIntent's: the engine clears
	// with either.
	wantIntent(t, b, first, v1)
	for _, data := range [][]byte{second, first} {
		if _, err := b.WriteIntent(ctx, data); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("WriteIntent over an intent: %v, want ErrConflict", err)
		}
		wantIntent(t, b, first, v1)
	}

	// Another object's version is not the intent's.
	other, err := b.WriteIfVersion(ctx, "other.json", second, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ClearIntent(ctx, other); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("ClearIntent at another version: %v, want ErrConflict", err)
	}
	wantIntent(t, b, first, v1)
	if err := b.ClearIntent(ctx, v1); err != nil {
		t.Fatalf("ClearIntent at the written version: %v", err)
	}
	wantIntent(t, b, nil, "")

	// Cleared, it is no version.
	if err := b.ClearIntent(ctx, v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("ClearIntent of a cleared intent at its old version: %v, want ErrConflict", err)
	}
	if err := b.SyncIntent(ctx); err != nil {
		t.Fatalf("SyncIntent: %v", err)
	}
	wantIntent(t, b, nil, "")

	// A shorter intent after a clear: nothing of the first stays.
	v2, err := b.WriteIntent(ctx, second)
	if err != nil {
		t.Fatalf("WriteIntent after a clear: %v", err)
	}
	wantIntent(t, b, second, v2)
	if err := b.ClearIntent(ctx, v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("ClearIntent at the first intent's version: %v, want ErrConflict", err)
	}
	wantIntent(t, b, second, v2)
	if _, v, err := b.ReadIntent(ctx); err != nil {
		t.Fatal(err)
	} else if err := b.ClearIntent(ctx, v); err != nil {
		t.Fatalf("ClearIntent at ReadIntent's version: %v", err)
	}
	wantIntent(t, b, nil, "")

	// The same bytes again: a new intent like any other.
	v3, err := b.WriteIntent(ctx, first)
	if err != nil {
		t.Fatalf("WriteIntent of the first bytes again: %v", err)
	}
	wantIntent(t, b, first, v3)
	if err := b.ClearIntent(ctx, v3); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantIntent(t, b, nil, "")

	// The intent is not the other object.
	wantVersion(t, b, "other.json", second, other)
}

// ClearIntent("") clears whatever the intent is, and nothing is fine.
func testIntentClearedWhatever(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	if err := b.ClearIntent(ctx, ""); err != nil {
		t.Fatalf("ClearIntent(\"\") on a fresh root: %v", err)
	}
	wantIntent(t, b, nil, "")
	for i := range 3 {
		data := fmt.Appendf(nil, "intent %d", i)
		v, err := b.WriteIntent(ctx, data)
		if err != nil {
			t.Fatalf("WriteIntent #%d: %v", i, err)
		}
		wantIntent(t, b, data, v)
		if err := b.ClearIntent(ctx, ""); err != nil {
			t.Fatalf("ClearIntent(\"\") #%d: %v", i, err)
		}
		wantIntent(t, b, nil, "")
		if err := b.ClearIntent(ctx, ""); err != nil {
			t.Fatalf("ClearIntent(\"\") of a cleared intent: %v", err)
		}
		if err := b.SyncIntent(ctx); err != nil {
			t.Fatalf("SyncIntent: %v", err)
		}
		wantIntent(t, b, nil, "")
	}
}

// Writers racing for a root without an intent (never written, and
// cleared): one wins, the others get ErrConflict, and the intent is the
// winner's.
func testIntentRace(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	for round := range 4 {
		const n = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		versions := make([]storage.Version, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				versions[i], errs[i] = b.WriteIntent(ctx, fmt.Appendf(nil, "round %d, writer %d", round, i))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both wrote the intent", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, storage.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer wrote the intent", round)
		}
		wantIntent(t, b, fmt.Appendf(nil, "round %d, writer %d", round, winner), versions[winner])
		if err := b.ClearIntent(ctx, versions[winner]); err != nil {
			t.Fatal(err)
		}
	}
}

// Where Properties().TornIntents is false, intents are written whole: a
// reader of the intent while it is written and cleared sees none, or one
// whole. Where true, a torn copy is allowed (after a crash, and to a
// reader meanwhile), which no test can tell from a correct one.
func testIntentWhole(t *testing.T, b storage.Backend) {
	if b.Properties().TornIntents {
		t.Skip("Properties().TornIntents: the backend rewrites its intent in place")
	}
	ctx := t.Context()
	intents := [][]byte{bytes.Repeat([]byte("A"), 256<<10), bytes.Repeat([]byte("b"), 100<<10)}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				data, _, err := b.ReadIntent(ctx)
				if err != nil {
					errs <- fmt.Errorf("ReadIntent while intents are written: %w", err)
					return
				}
				if data != nil && !bytes.Equal(data, intents[0]) && !bytes.Equal(data, intents[1]) {
					errs <- fmt.Errorf("ReadIntent read a torn intent (%d bytes)", len(data))
					return
				}
			}
		})
	}
	for i := range 20 {
		v, err := b.WriteIntent(ctx, intents[i%2])
		if err == nil {
			err = b.ClearIntent(ctx, v)
		}
		if err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("intent %d: %v", i, err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
