package engine_test

// File <-> folder transitions of managed outputs, end to end on both
// backends. S3 could hold the keys "docs" and "docs/index.txt" side by
// side, but a root mirrors a folder tree on every backend, so the managed
// object in the way is deleted there too.

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
)

// orderBackend records the mutating calls made through it, in order.
type orderBackend struct {
	storage.Backend
	mu    sync.Mutex
	calls []string
}

func (o *orderBackend) log(op, p string) {
	if p == lease.LockPath || strings.HasPrefix(p, catalog.ReservedDir+"/reports/") || strings.HasPrefix(p, engine.FingerprintsDir+"/") {
		return // the lease's traffic, pending reports and the fingerprint index
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, op+" "+p)
}

func (o *orderBackend) Put(ctx context.Context, p string, r io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	o.log("put", p)
	return o.Backend.Put(ctx, p, r, size, opts)
}

func (o *orderBackend) Delete(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		o.log("delete", p)
	}
	return o.Backend.Delete(ctx, paths...)
}

func (o *orderBackend) hookWriteIfVersion(ctx context.Context, p string, data []byte, v storage.Version, opts ...storage.Option) (storage.Version, error) {
	o.log("cas", p)
	return o.Backend.WriteIfVersion(ctx, p, data, v, opts...)
}

func (o *orderBackend) hookDeleteIfVersion(ctx context.Context, p string, v storage.Version, opts ...storage.Option) error {
	o.log("cas-delete", p)
	return o.Backend.DeleteIfVersion(ctx, p, v, opts...)
}

// The intent's write and removal log as the compare-and-swaps they are.
func (o *orderBackend) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	o.log("cas", engine.IntentPath)
	return o.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
}

func (o *orderBackend) hookClearIntent(ctx context.Context, want storage.Version) error {
	o.log("cas-delete", engine.IntentPath)
	return o.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

// A staged output logs as a put when it is named.
func (o *orderBackend) Stage(ctx context.Context) storage.Stage {
	return hookedStage(o.Backend.Stage(ctx), func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		o.log("put", p)
		return commit()
	})
}

// The catalog's commit logs as a compare-and-swap.
func (o *orderBackend) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	return orderedCatalog{o.Backend.PrepareCatalog(ctx, next, writes), o}
}

type orderedCatalog struct {
	storage.PendingCatalog
	o *orderBackend
}

func (c orderedCatalog) Commit(ctx context.Context, want storage.Version) (storage.Version, error) {
	c.o.log("cas", catalog.FileName)
	return c.PendingCatalog.Commit(ctx, want)
}

// take returns the calls so far and forgets them. Writes run concurrently,
// so each run of puts of outputs comes sorted.
func (o *orderBackend) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.calls
	o.calls = nil
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.HasPrefix(out[j], "put ") && !strings.HasPrefix(out[j], "put "+catalog.ReservedDir) {
			j++
		}
		slices.Sort(out[i:j])
		i = j + 1
	}
	return out
}

// A managed file becomes a folder and back, in both workflows: the object
// in the way is deleted after the intent and before the writes, reported
// as deleted, and its record leaves the catalog.
func TestManagedFileBecomesFolderAndBack(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		for _, wf := range []planner.Workflow{planner.Replacement, planner.Additive} {
			t.Run(string(wf), func(t *testing.T) {
				h := newHarness(t)
				plain, base := newRoot(t)
				root := &orderBackend{Backend: plain}
				h.AddDest(named(base, "latest", wf), root, pipeA)
				h.MustPublish(t1, pipeA, "latest", "weatherreporter.v1", map[string]string{"docs": "file\n", "keep.txt": "k\n"})
				root.take()

				res := h.MustPublish(t2, pipeA, "latest", "weatherreporter.v2", map[string]string{"docs/index.txt": "index\n", "docs/sub/more.txt": "more\n", "keep.txt": "k\n"})
				wantStrings(t, "deleted", res.Deleted, []string{"docs"})
				wantStrings(t, "written", itemPaths(res.Written), []string{"docs/index.txt", "docs/sub/more.txt"})
				wantStrings(t, "calls", root.take(), []string{
					"cas " + engine.IntentPath, "delete docs", "put docs/index.txt", "put docs/sub/more.txt",
					"cas " + catalog.FileName, "cas-delete " + engine.IntentPath,
				})
				wantContents(t, plain, map[string]string{"docs/index.txt": "index\n", "docs/sub/more.txt": "more\n", "keep.txt": "k\n"})
				cat := assertDescribesStorage(t, plain)
				wantStrings(t, "records", recordPaths(cat), []string{"docs/index.txt", "docs/sub/more.txt", "keep.txt"})

				res = h.MustPublish(t2.Add(time.Minute), pipeA, "latest", "weatherreporter.v3", map[string]string{"docs": "file again\n", "keep.txt": "k\n"})
				wantStrings(t, "deleted", res.Deleted, []string{"docs/index.txt", "docs/sub/more.txt"})
				wantStrings(t, "written", itemPaths(res.Written), []string{"docs"})
				wantStrings(t, "calls", root.take(), []string{
					"cas " + engine.IntentPath, "delete docs/index.txt", "delete docs/sub/more.txt", "put docs",
					"cas " + catalog.FileName, "cas-delete " + engine.IntentPath,
				})
				wantContents(t, plain, map[string]string{"docs": "file again\n", "keep.txt": "k\n"})
				cat = assertDescribesStorage(t, plain)
				wantStrings(t, "records", recordPaths(cat), []string{"docs", "keep.txt"})
			})
		}
	})
}

// Another owner's managed output in the way is displaced as well (any
// publication may overwrite managed outputs); the replacement deletes of
// the publishing owner still run after the writes.
func TestOtherOwnersOutputInTheWayIsDisplaced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := &orderBackend{Backend: plain}
		h.AddDest(named(base, "weather", planner.Replacement), root, pipeA)
		h.AddDest(named(base, "tides", planner.Replacement), root, pipeB)
		h.MustPublish(t1, pipeB, "tides", "tides.v1", map[string]string{"docs": "tides\n"})
		h.MustPublish(t1, pipeA, "weather", "weatherreporter.v1", map[string]string{"old.txt": "o\n"})
		root.take()

		res := h.MustPublish(t2, pipeA, "weather", "weatherreporter.v2", map[string]string{"docs/index.txt": "index\n"})
		wantStrings(t, "deleted", res.Deleted, []string{"docs", "old.txt"})
		wantStrings(t, "calls", root.take(), []string{
			"cas " + engine.IntentPath, "delete docs", "put docs/index.txt", "delete old.txt",
			"cas " + catalog.FileName, "cas-delete " + engine.IntentPath,
		})
		wantContents(t, plain, map[string]string{"docs/index.txt": "index\n"})
		cat := assertDescribesStorage(t, plain)
		if r := mustRecord(t, cat, "docs/index.txt"); r.PipelineID != pipeA {
			t.Fatalf("docs/index.txt owned by %s, want %s", r.PipelineID, pipeA)
		}

		// And back: the other owner's file displaces our folder.
		res = h.MustPublish(t2, pipeB, "tides", "tides.v2", map[string]string{"docs": "tides again\n"})
		wantStrings(t, "deleted", res.Deleted, []string{"docs/index.txt"})
		wantContents(t, plain, map[string]string{"docs": "tides again\n"})
		cat = assertDescribesStorage(t, plain)
		if r := mustRecord(t, cat, "docs"); r.PipelineID != pipeB {
			t.Fatalf("docs owned by %s, want %s", r.PipelineID, pipeB)
		}
	})
}

// Unmanaged content in the way of a file or folder blocks the publication,
// --take-ownership or not, and the message says to remove it rather than
// to adopt it. Nothing is written or deleted.
func TestUnmanagedContentInTheWayBlocks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		for _, tc := range []struct {
			name      string
			managed   map[string]string
			unmanaged map[string]string
			files     map[string]string
			message   string
		}{
			{"file where a folder is needed", map[string]string{"mine.txt": "mine\n"}, map[string]string{"docs": "theirs"}, map[string]string{"docs/index.txt": "index\n"},
				`1 planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): ["docs/index.txt"], in the way: ["docs"]`},
			{"partially managed folder where a file is needed", map[string]string{"docs/mine.txt": "mine\n"}, map[string]string{"docs/theirs.txt": "theirs"}, map[string]string{"docs": "file\n"},
				`1 planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): ["docs"], in the way: ["docs/theirs.txt"]`},
		} {
			for _, take := range []bool{false, true} {
				name := tc.name
				if take {
					name += "/take-ownership"
				}
				t.Run(name, func(t *testing.T) {
					h := newHarness(t)
					plain, base := newRoot(t)
					root := &orderBackend{Backend: plain}
					h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
					h.MustPublish(t1, pipeA, "latest", "weatherreporter.v1", tc.managed)
					for p, c := range tc.unmanaged {
						mustPut(t, plain, p, c)
					}
					before, v := contents(t, plain), catalogVersion(t, plain)
					root.take()

					dir, _ := makeBundle(t, "weatherreporter.v2", tc.files)
					res, err := h.Publish(t2, pipeA, "latest", dir, func(r *service.Request) { r.TakeOwnership = take })
					if !errors.Is(err, engine.ErrCollision) {
						t.Fatalf("err = %v, want ErrCollision", err)
					}
					if want := "collision with unmanaged content in " + plain.String() + ": " + tc.message; err.Error() != want {
						t.Fatalf("error:\n%s\nwant:\n%s", err, want)
					}
					wantStrings(t, "calls", root.take(), nil)
					wantStrings(t, "deleted", res.Deleted, nil)
					wantContents(t, plain, before)
					if got := catalogVersion(t, plain); got != v {
						t.Fatalf("catalog version %s -> %s", v, got)
					}
				})
			}
		}
	})
}

// A write that fails after the displaced delete landed: the failed attempt
// drops the displaced record at once (the catalog describes storage), and
// the retry of the same event reports the delete, so downstream hears of
// it from the attempt that finishes.
func TestRetryAfterFailedWriteReportsTheDisplacedDelete(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		flaky := &failOncePut{Backend: plain, path: "docs/index.txt"}
		h.AddDest(named(base, "latest", planner.Replacement), flaky, pipeA)
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.v1", map[string]string{"docs": "file\n"})

		dir, _ := makeBundle(t, "weatherreporter.v2", map[string]string{"docs/index.txt": "index\n"})
		res, err := h.Publish(t2, pipeA, "latest", dir)
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("first attempt: %v, want the injected transient error", err)
		}
		wantStrings(t, "deleted by the failed attempt", res.Deleted, []string{"docs"})
		cat, _ := readCatalog(t, plain)
		wantStrings(t, "records after the failed attempt", recordPaths(cat), nil)

		res, err = h.Publish(t2, pipeA, "latest", dir)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		wantStrings(t, "deleted by the retry", res.Deleted, []string{"docs"})
		wantStrings(t, "written by the retry", itemPaths(res.Written), []string{"docs/index.txt"})
		wantContents(t, plain, map[string]string{"docs/index.txt": "index\n"})
		assertDescribesStorage(t, plain)
	})
}

// A legacy first run treats the root's content as the earlier version's
// output, so legacy content in the way of a planned path is deleted before
// the writes (rather than blocking the one run that writes a catalog).
// Replacement clears the rest; additive keeps it.
func TestLegacyContentInTheWayIsDisplaced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		for _, wf := range []planner.Workflow{planner.Replacement, planner.Additive} {
			t.Run(string(wf), func(t *testing.T) {
				h := newHarness(t)
				root, base := newRoot(t)
				h.AddDest(named(base, "latest", wf), root, pipeA)
				putLegacyCatalog(t, root)
				for p, c := range map[string]string{"docs": "legacy file", "site/a.html": "legacy a", "notes.txt": "n"} {
					mustPut(t, root, p, c)
				}

				res := h.MustPublish(t1, pipeA, "latest", "weatherreporter.v1", map[string]string{"docs/index.txt": "index\n", "site": "now a file\n"})
				wantStrings(t, "written", itemPaths(res.Written), []string{"docs/index.txt", "site"})
				want := map[string]string{"docs/index.txt": "index\n", "site": "now a file\n"}
				if wf == planner.Replacement {
					wantStrings(t, "deleted", res.Deleted, []string{"docs", "site/a.html", "notes.txt"})
				} else {
					wantStrings(t, "deleted", res.Deleted, []string{"docs", "site/a.html"})
					want["notes.txt"] = "n"
				}
				wantContents(t, root, want)
				cat, _ := readCatalog(t, root)
				wantStrings(t, "records", recordPaths(cat), []string{"docs/index.txt", "site"})
			})
		}
	})
}

// Dispatch of the contract's calls to the hooks above.

func (o *orderBackend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return o.hookWriteIntent(ctx, data)
	}
	return o.hookWriteIfVersion(ctx, p, data, want, opts...)
}

func (o *orderBackend) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return o.hookClearIntent(ctx, want)
	}
	return o.hookDeleteIfVersion(ctx, p, want, opts...)
}
