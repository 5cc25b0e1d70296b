package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// The intent is a compare-and-swap document the engine writes with
// storage.InPlace (and removes with DeferSync): these are its calls, at a
// path of the reserved folder.
const intentPath = catalog.ReservedDir + "/in-place.json"

func readIntent(ctx context.Context, b storage.Backend) ([]byte, storage.Version, error) {
	data, v, err := b.ReadVersion(ctx, intentPath, storage.InPlace)
	if len(data) == 0 {
		data = nil
	}
	return data, v, err
}

func writeIntent(ctx context.Context, b storage.Backend, data []byte) (storage.Version, error) {
	return b.WriteIfVersion(ctx, intentPath, data, "", storage.InPlace)
}

func clearIntent(ctx context.Context, b storage.Backend, want storage.Version) error {
	return b.DeleteIfVersion(ctx, intentPath, want, storage.InPlace, storage.DeferSync)
}

// wantIntent checks readIntent: data (nil: none) and, with data, version v.
func wantIntent(t *testing.T, b storage.Backend, data []byte, v storage.Version) {
	t.Helper()
	got, gotV, err := readIntent(t.Context(), b)
	if err != nil {
		t.Fatalf("readIntent: %v", err)
	}
	if data == nil {
		if got != nil {
			t.Fatalf("readIntent = %q, %q; want nil bytes (no intent)", got, gotV)
		}
		return
	}
	if !bytes.Equal(got, data) || gotV != v {
		t.Fatalf("readIntent = %q, %q; want %q, %q", got, gotV, data, v)
	}
}

// The intent is written only where none is, read back with the version
// writeIntent returned, and cleared only at that version.
func testIntent(t *testing.T, b storage.Backend) {
	ctx := t.Context()
	wantIntent(t, b, nil, "")
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync on a fresh root: %v", err)
	}
	first := []byte(`{"intent":"first, the longest of them","sum":"1"}`)
	second := []byte(`{"intent":"second","sum":"2"}`)
	v1, err := writeIntent(ctx, b, first)
	if err != nil || v1 == "" {
		t.Fatalf("writeIntent on a fresh root = %q, %v; want a version", v1, err)
	}

	// The version readIntent returns is writeIntent's: the engine clears
	// with either.
	wantIntent(t, b, first, v1)
	for _, data := range [][]byte{second, first} {
		if _, err := writeIntent(ctx, b, data); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("writeIntent over an intent: %v, want ErrConflict", err)
		}
		wantIntent(t, b, first, v1)
	}

	// Another object's version is not the intent's.
	other, err := b.WriteIfVersion(ctx, "other.json", second, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := clearIntent(ctx, b, other); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("clearIntent at another version: %v, want ErrConflict", err)
	}
	wantIntent(t, b, first, v1)
	if err := clearIntent(ctx, b, v1); err != nil {
		t.Fatalf("clearIntent at the written version: %v", err)
	}
	wantIntent(t, b, nil, "")

	// Cleared, it is no version.
	if err := clearIntent(ctx, b, v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("clearIntent of a cleared intent at its old version: %v, want ErrConflict", err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantIntent(t, b, nil, "")

	// A shorter intent after a clear: nothing of the first stays.
	v2, err := writeIntent(ctx, b, second)
	if err != nil {
		t.Fatalf("writeIntent after a clear: %v", err)
	}
	wantIntent(t, b, second, v2)
	if err := clearIntent(ctx, b, v1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("clearIntent at the first intent's version: %v, want ErrConflict", err)
	}
	wantIntent(t, b, second, v2)
	if _, v, err := readIntent(ctx, b); err != nil {
		t.Fatal(err)
	} else if err := clearIntent(ctx, b, v); err != nil {
		t.Fatalf("clearIntent at readIntent's version: %v", err)
	}
	wantIntent(t, b, nil, "")

	// The same bytes again: a new intent like any other.
	v3, err := writeIntent(ctx, b, first)
	if err != nil {
		t.Fatalf("writeIntent of the first bytes again: %v", err)
	}
	wantIntent(t, b, first, v3)
	if err := clearIntent(ctx, b, v3); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantIntent(t, b, nil, "")

	// The intent is not the other object.
	wantVersion(t, b, "other.json", second, other)
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
				versions[i], errs[i] = writeIntent(ctx, b, fmt.Appendf(nil, "round %d, writer %d", round, i))
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
		if err := clearIntent(ctx, b, versions[winner]); err != nil {
			t.Fatal(err)
		}
	}
}

// Where Properties().TornInPlace is false, intents are written whole: a
// reader of the intent while it is written and cleared sees none, or one
// whole. Where true, a torn copy is allowed (after a crash, and to a
// reader meanwhile), which no test can tell from a correct one.
func testIntentWhole(t *testing.T, b storage.Backend) {
	if b.Properties().TornInPlace {
		t.Skip("Properties().TornInPlace: the backend rewrites its intent in place")
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
				data, _, err := readIntent(ctx, b)
				if err != nil {
					errs <- fmt.Errorf("readIntent while intents are written: %w", err)
					return
				}
				if data != nil && !bytes.Equal(data, intents[0]) && !bytes.Equal(data, intents[1]) {
					errs <- fmt.Errorf("readIntent read a torn intent (%d bytes)", len(data))
					return
				}
			}
		})
	}
	for i := range 20 {
		v, err := writeIntent(ctx, b, intents[i%2])
		if err == nil {
			err = clearIntent(ctx, b, v)
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
