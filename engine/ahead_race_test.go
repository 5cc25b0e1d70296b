package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// raceAtStreamedCommit is raceAtCommit for a large catalog, encoded into
// its file beside the writes and placed before the barrier: another
// writer commits the catalog right before it.
type raceAtStreamedCommit struct {
	*local.Backend
	prepared atomic.Int32
}

func (r *raceAtStreamedCommit) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	r.prepared.Add(1)
	return racedPending{r.Backend.PrepareCatalog(ctx, next, writes), r.Backend}
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
	rb, _ := local.New(ref, local.WithStreamMinOutputs(spec.streamMin))
	if _, err := runPublication(t, rb, heldLease{}, spec, largeTree(1), fixedNow); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref)

	root := t.TempDir()
	before(t, root)
	b, _ := local.New(root, local.WithStreamMinOutputs(spec.streamMin))
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
		t.Fatalf("the catalog was prepared %d times, want once", raced.prepared.Load())
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

// racingPreparer is an S3 root whose catalog write, prepared beside the
// outputs, is overtaken once armed: another writer
// commits the catalog (the same records, a second later) right before it.
type racingPreparer struct {
	*s3store.Backend
	armed  atomic.Bool
	theirs []byte // the other writer's catalog
}

func (r *racingPreparer) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	pc := r.Backend.PrepareCatalog(ctx, next, writes)
	if !r.armed.Swap(false) {
		return pc
	}
	return racedWrite{PendingCatalog: pc, r: r}
}

type racedWrite struct {
	storage.PendingCatalog
	r *racingPreparer
}

func (w racedWrite) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	theirs, err := commitAnotherCatalog(ctx, w.r.Backend)
	if err != nil {
		return "", err
	}
	w.r.theirs = theirs
	return w.PendingCatalog.Commit(ctx, want)
}

// TestS3CatalogPreparedBesideTheWritesLosingTheRace: on S3 the catalog's
// write is prepared (encoded, its sha256 taken) beside the outputs and its
// shards are written beside its compare-and-swap; another writer's commit
// in between still makes the publication fail as a race, leaves that
// writer's catalog in place, and the retry ends with the catalog an
// uninterrupted run writes.
func TestS3CatalogPreparedBesideTheWritesLosingTheRace(t *testing.T) {
	t.Parallel()
	srv := testenv.NewS3(t)
	base := func(bucket string) config.Destination {
		return config.Destination{Backend: config.BackendS3, Bucket: bucket, Path: s3Prefix,
			Region: "us-east-1", Endpoint: srv.URL, PathStyle: true}
	}
	v1 := map[string]string{}
	for i := range 20 {
		v1[fmt.Sprintf("d/f%02d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	v2 := maps.Clone(v1)
	v2["d/f03.txt"], v2["d/f11.txt"], v2["d/new.txt"] = "changed 3\n", "changed 11\n", "new\n"
	delete(v2, "d/f19.txt")

	ref := newHarness(t)
	refBucket := srv.Bucket(t)
	refRoot := srv.Backend(t, refBucket, s3Prefix)
	ref.AddDest(named(base(refBucket), "archive", planner.Replacement), refRoot, pipeA)
	ref.MustPublish(t1, pipeA, "archive", "weatherreporter.today", v1)
	ref.MustPublish(t2, pipeA, "archive", "weatherreporter.today", v2)
	wantCatalog, _, err := refRoot.ReadVersion(context.Background(), catalog.FileName)
	if err != nil {
		t.Fatal(err)
	}

	h := newHarness(t)
	bucket := srv.Bucket(t)
	root := &racingPreparer{Backend: srv.Backend(t, bucket, s3Prefix).(*s3store.Backend)}
	h.AddDest(named(base(bucket), "archive", planner.Replacement), root, pipeA)
	h.MustPublish(t1, pipeA, "archive", "weatherreporter.today", v1)
	dir, _ := makeBundleAt(t, "weatherreporter.today", t2.Add(-time.Hour), v2) // as mustPublish at t2
	root.armed.Store(true)
	if _, err := h.Publish(t2, pipeA, "archive", dir); !errors.Is(err, engine.ErrCatalogRace) {
		t.Fatalf("publication overtaken at its commit: %v, want ErrCatalogRace", err)
	}
	if root.armed.Load() || root.theirs == nil {
		t.Fatal("the catalog's commit was not overtaken")
	}
	if cur, _, err := root.ReadVersion(context.Background(), catalog.FileName); err != nil || !bytes.Equal(cur, root.theirs) {
		t.Fatalf("the catalog after the lost race is not the other writer's (%v):\n%s", err, cur)
	}
	res, err := h.Publish(t2, pipeA, "archive", dir)
	if err != nil || !res.Recovered {
		t.Fatalf("retry: %v, recovered %v", err, res.Recovered)
	}
	wantContents(t, root, contents(t, refRoot))
	assertDescribesStorage(t, root)
	if got, _, err := root.ReadVersion(context.Background(), catalog.FileName); err != nil || !bytes.Equal(got, wantCatalog) {
		t.Fatalf("catalog after the retry (%v):\n%s\nuninterrupted run:\n%s", err, got, wantCatalog)
	}
}
