package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// raceAtStreamedCommit is raceAtCommit for a large catalog, encoded into
// its file beside the writes (PrepareVersionFrom) and placed before the
// barrier: another writer commits the catalog right before it.
type raceAtStreamedCommit struct {
	*local.Backend
	prepared atomic.Int32
}

func (r *raceAtStreamedCommit) PrepareVersionFrom(ctx context.Context, p string, write func(io.Writer) error) (storage.PreparedVersion, error) {
	r.prepared.Add(1)
	pv, err := r.Backend.PrepareVersionFrom(ctx, p, write)
	if err != nil {
		return nil, err
	}
	return racedPlaced{racedPrepared{pv, r.Backend}}, nil
}

// racedPlaced keeps the prepared version's Place, so that the publication
// takes its own path (named before the barrier).
type racedPlaced struct{ racedPrepared }

func (p racedPlaced) Place() error {
	return p.PreparedVersion.(interface{ Place() error }).Place()
}

// TestACatalogPreparedAheadLosingTheRaceLeavesNothing: a large catalog
// encoded beside the writes and placed before the barrier still commits
// only over the version the plan read: another writer's commit in between
// makes it fail as a race, the other writer's catalog stays byte for byte,
// no temp file is left (neither the placed catalog nor a swapped-out
// output), the intent stays, and the retry ends where an uninterrupted
// run ends.
func TestACatalogPreparedAheadLosingTheRaceLeavesNothing(t *testing.T) {
	t.Parallel()
	spec := publicationSpec{workflow: planner.Replacement, eventID: "ev-1", streamMin: 8}
	before := publishedBefore(planner.Replacement, largeTree(0))
	ref := t.TempDir()
	before(t, ref)
	rb, _ := local.New(ref)
	if _, err := runPublication(t, rb, heldLease{}, spec, largeTree(1), fixedNow); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref)

	root := t.TempDir()
	before(t, root)
	b, _ := local.New(root)
	// What the other writer commits: the catalog read, a second later.
	old, err := os.ReadFile(filepath.Join(root, catalog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := catalog.Parse(old)
	if err != nil {
		t.Fatal(err)
	}
	theirs.UpdatedAt = theirs.UpdatedAt.Add(time.Second)
	wantTheirs, err := catalog.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	raced := &raceAtStreamedCommit{Backend: b}
	_, err = runPublication(t, raced, heldLease{}, spec, largeTree(1), fixedNow)
	if !errors.Is(err, engine.ErrCatalogRace) {
		t.Fatalf("publication overtaken at its commit: %v, want ErrCatalogRace", err)
	}
	if raced.prepared.Load() != 1 {
		t.Fatalf("the catalog was prepared ahead %d times, want once (the large-catalog path)", raced.prepared.Load())
	}
	if cur, err := os.ReadFile(filepath.Join(root, catalog.FileName)); err != nil || !bytes.Equal(cur, wantTheirs) {
		t.Fatalf("the catalog after the lost race is not the other writer's (%v):\n%s", err, cur)
	}
	if left := tempFiles(t, root); len(left) > 0 {
		t.Fatalf("the lost race left temp files %q", left)
	}
	if !intentPending(t, root) {
		t.Fatal("the lost race dropped the intent")
	}
	res, err := runPublication(t, b, heldLease{}, spec, largeTree(1), fixedNow)
	if err != nil || !res.Recovered {
		t.Fatalf("retry: %v, recovered %v", err, res.Recovered)
	}
	if d := diff(snapshot(t, root), want); d != "" {
		t.Fatalf("the retry ends elsewhere:\n%s", d)
	}
	if left := tempFiles(t, root); len(left) > 0 {
		t.Fatalf("the retry left temp files %q", left)
	}
}
