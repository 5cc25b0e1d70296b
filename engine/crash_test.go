package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

var errKilled = errors.New("killed (injected)")

// dyingBackend simulates a process killed just before its n-th mutating
// call: that call and every later one, reads included, fail.
type dyingBackend struct {
	storage.Backend
	mu     sync.Mutex
	killAt int // 1-based; 0 = never
	calls  int
	dead   bool
	// committedAt is the call number of the last catalog commit.
	committedAt int
	// fingerprintCalls counts the writes of fingerprint index shards.
	fingerprintCalls int
	// afterIntent, when set, kills at the first mutating call after the
	// intent is written.
	afterIntent bool
	// atCommit, when set, kills at the catalog's commit (every output
	// named, the catalog not).
	atCommit bool
}

func (d *dyingBackend) mutate() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.killAt > 0 && d.calls >= d.killAt {
		d.dead = true
	}
	if d.dead {
		return errKilled
	}
	return nil
}

func (d *dyingBackend) read() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return errKilled
	}
	return nil
}

func (d *dyingBackend) hookPut(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	if err := d.mutate(); err != nil {
		return storage.ObjectInfo{}, err
	}
	if strings.HasPrefix(p, engine.FingerprintsDir+"/") {
		d.mu.Lock()
		d.fingerprintCalls++
		d.mu.Unlock()
	}
	return d.Backend.Put(ctx, p, r, size, o)
}

func (d *dyingBackend) Delete(ctx context.Context, paths ...string) error {
	for _, p := range paths { // a kill can land inside a batch
		if err := d.mutate(); err != nil {
			return err
		}
		if err := d.Backend.Delete(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (d *dyingBackend) hookWriteIfVersion(ctx context.Context, p string, data []byte, v storage.Version, opts ...storage.Option) (storage.Version, error) {
	if err := d.mutate(); err != nil {
		return "", err
	}
	if p == catalog.FileName {
		d.mu.Lock()
		d.committedAt = d.calls
		d.mu.Unlock()
	}
	return d.Backend.WriteIfVersion(ctx, p, data, v, opts...)
}

func (d *dyingBackend) hookDeleteIfVersion(ctx context.Context, p string, v storage.Version, opts ...storage.Option) error {
	if err := d.mutate(); err != nil {
		return err
	}
	return d.Backend.DeleteIfVersion(ctx, p, v, opts...)
}

func (d *dyingBackend) Stat(ctx context.Context, p string) (storage.ObjectInfo, error) {
	if err := d.read(); err != nil {
		return storage.ObjectInfo{}, err
	}
	return d.Backend.Stat(ctx, p)
}

func (d *dyingBackend) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if err := d.read(); err != nil {
		return storage.Reader{}, err
	}
	return d.Backend.Open(ctx, p, opts...)
}

func (d *dyingBackend) hookReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if err := d.read(); err != nil {
		return nil, "", err
	}
	return d.Backend.ReadVersion(ctx, p, opts...)
}

func (d *dyingBackend) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if err := d.read(); err != nil {
		return err
	}
	return d.Backend.List(ctx, prefix, fn)
}

func (d *dyingBackend) Find(ctx context.Context, q storage.Query, fn func(storage.ObjectInfo) error) error {
	if err := d.read(); err != nil {
		return err
	}
	return d.Backend.Find(ctx, q, fn)
}

func (d *dyingBackend) hookReadIntent(ctx context.Context) ([]byte, storage.Version, error) {
	if err := d.read(); err != nil {
		return nil, "", err
	}
	return d.Backend.ReadVersion(ctx, engine.IntentPath, storage.InPlace)
}

func (d *dyingBackend) hookWriteIntent(ctx context.Context, data []byte) (storage.Version, error) {
	if err := d.mutate(); err != nil {
		return "", err
	}
	v, err := d.Backend.WriteIfVersion(ctx, engine.IntentPath, data, "", storage.InPlace)
	d.mu.Lock()
	if err == nil && d.afterIntent {
		d.killAt = d.calls + 1
	}
	d.mu.Unlock()
	return v, err
}

func (d *dyingBackend) hookClearIntent(ctx context.Context, want storage.Version) error {
	if err := d.mutate(); err != nil {
		return err
	}
	return d.Backend.DeleteIfVersion(ctx, engine.IntentPath, want, storage.InPlace, storage.DeferSync)
}

func (d *dyingBackend) hookOverwrite(ctx context.Context, p string, data []byte) error {
	if err := d.mutate(); err != nil {
		return err
	}
	if strings.HasPrefix(p, engine.FingerprintsDir+"/") {
		d.mu.Lock()
		d.fingerprintCalls++
		d.mu.Unlock()
	}
	return putInPlace(ctx, d.Backend, p, data)
}

func (d *dyingBackend) Sync(ctx context.Context) error {
	if err := d.read(); err != nil {
		return err
	}
	return d.Backend.Sync(ctx)
}

// Stage: staging and naming an output are mutating calls too.
func (d *dyingBackend) Stage(ctx context.Context) storage.Stage {
	return &dyingStage{Stage: d.Backend.Stage(ctx), d: d}
}

type dyingStage struct {
	storage.Stage
	d *dyingBackend
}

func (s *dyingStage) Put(ctx context.Context, p string, r storage.Source, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	if err := s.d.mutate(); err != nil {
		return storage.ObjectInfo{}, err
	}
	return s.Stage.Put(ctx, p, r, size, o)
}

func (s *dyingStage) Commit(ctx context.Context, p string) (storage.ObjectInfo, error) {
	if err := s.d.mutate(); err != nil {
		return storage.ObjectInfo{}, err
	}
	return s.Stage.Commit(ctx, p)
}

// PrepareCatalog (the catalog's bytes written before the barrier) and the
// commit are mutating calls too.
func (d *dyingBackend) PrepareCatalog(ctx context.Context, next storage.Document, writes int) storage.PendingCatalog {
	pc := d.Backend.PrepareCatalog(ctx, next, writes)
	if err := d.mutate(); err != nil {
		pc.Close()
		return dyingPending{err: err}
	}
	return &dyingPending{PendingCatalog: pc, d: d}
}

type dyingPending struct {
	storage.PendingCatalog
	d   *dyingBackend
	err error
}

func (pc dyingPending) Commit(ctx context.Context, v storage.Version) (storage.Version, error) {
	if pc.err != nil {
		return "", pc.err
	}
	pc.d.mu.Lock()
	if pc.d.atCommit {
		pc.d.dead = true
	}
	pc.d.mu.Unlock()
	if err := pc.d.mutate(); err != nil {
		return "", err
	}
	pc.d.mu.Lock()
	pc.d.committedAt = pc.d.calls
	pc.d.mu.Unlock()
	return pc.PendingCatalog.Commit(ctx, v)
}

func (pc dyingPending) Close() error {
	if pc.PendingCatalog == nil {
		return nil
	}
	return pc.PendingCatalog.Close()
}

// heldLease is a lease that is always held (the crash tests are about
// storage order, not lease expiry).
type heldLease struct{}

func (heldLease) Token() string                 { return "1" }
func (heldLease) Err() error                    { return nil }
func (heldLease) Release(context.Context) error { return nil }
func (heldLease) Confirm(context.Context) error { return nil }

var _ lease.Lease = heldLease{}

// scenario is a root's starting state plus a publication to run on it.
type scenario struct {
	name     string
	workflow planner.Workflow
	// before prepares the root (earlier publications, legacy state, ...).
	before func(t *testing.T, root string)
	files  map[string]string // the bundle being published
	// streamMin, when positive, is the catalog size past which the
	// publication encodes its catalog as it writes it (local.WithStreamMinOutputs).
	streamMin int

	// streamed: the publication streams the catalog and plans with what
	// its plan selects, as into a large root (engine.Engine.WholeCatalog).
	streamed bool

	// publishLast and retain are the destination's publish_last and
	// retain_previous.
	publishLast []string
	retain      time.Duration
}

// publish runs the scenario's publication on root.
func (sc scenario) publish(t *testing.T, root storage.Backend) (engine.Result, error) {
	t.Helper()
	return runPublication(t, root, heldLease{}, publicationSpec{workflow: sc.workflow, html: true, eventID: "ev-1", streamMin: sc.streamMin, streamed: sc.streamed,
		publishLast: sc.publishLast, retain: sc.retain}, sc.files, fixedNow)
}

var fixedNow = time.Date(2026, 6, 19, 12, 5, 0, 0, time.UTC)

// publish runs one publication of files to root through the engine.
func publish(t *testing.T, root storage.Backend, wf planner.Workflow, files map[string]string, now time.Time) (engine.Result, error) {
	t.Helper()
	return runPublication(t, root, heldLease{}, publicationSpec{workflow: wf, html: true, eventID: "ev-1"}, files, now)
}

// publicationSpec is how runPublication publishes: the workflow, whether
// Markdown also goes out as HTML, the bundle event's id.
type publicationSpec struct {
	workflow planner.Workflow
	html     bool
	eventID  string
	// streamMin, streamed, publishLast, retain: see scenario.
	streamMin   int
	streamed    bool
	publishLast []string
	retain      time.Duration
}

// runPublication publishes files, as a bundle created a minute before now
// (a later publication is a newer version of the source), to root under l.
func runPublication(t *testing.T, root storage.Backend, l lease.Lease, spec publicationSpec, files map[string]string, now time.Time) (engine.Result, error) {
	t.Helper()
	ctx := context.Background()
	bdir := t.TempDir()
	testenv.WriteBundle(t, bdir, "weatherreporter.tomorrow", now.Add(-time.Minute), files)
	bstore, err := local.New(bdir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(ctx, bstore, bdir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dest := config.Destination{ID: "latest-html", Backend: "local", Workflow: spec.workflow,
		Publish: config.Publish{Sources: true, HTML: spec.html, Include: []string{"**"}}}
	if spec.html {
		dest.Transforms = []config.Transform{{Name: "markdown_to_html", Match: "**/*.md", Index: "report.md"}}
	}
	outs, err := service.Desire(ctx, dest, "weatherreporter.daily", b)
	if err != nil {
		t.Fatal(err)
	}
	pub := engine.Publication{
		Owner:    catalog.Owner{PipelineID: "weatherreporter.daily", DestinationID: "latest-html"},
		Workflow: spec.workflow, Source: catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created},
		BundleEventID: spec.eventID, Outputs: outs, Bundle: b, PublishLast: spec.publishLast, RetainPrevious: spec.retain,
	}
	e := &engine.Engine{Now: func() time.Time { return now }, Version: "test", Workers: 1}
	if spec.streamed {
		e.WholeCatalog = -1
	}
	if lb, ok := root.(*local.Backend); ok && spec.streamMin > 0 {
		// The same root, taking a large catalog's path.
		if root, err = local.New(lb.String(), local.WithStreamMinOutputs(spec.streamMin)); err != nil {
			t.Fatal(err)
		}
	}
	return e.Publish(ctx, root, l, pub)
}

var crashScenarios = []scenario{
	{
		name: "first publication into an empty root", workflow: planner.Additive,
		files: map[string]string{"report.md": "# Tomorrow\n\nSunny.\n", "data/a.csv": "a\n", "data/b.csv": "b\n"},
	},
	{
		name: "replacement update with creates, updates and deletes", workflow: planner.Replacement,
		before: func(t *testing.T, root string) {
			b, _ := local.New(root)
			if _, err := publish(t, b, planner.Replacement, map[string]string{
				"report.md": "# Today\n", "data/a.csv": "a\n", "data/old1.csv": "x\n", "data/old2.csv": "y\n",
			}, fixedNow.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			testenv.WriteFiles(t, root, map[string]string{"unmanaged/notes.txt": "mine"})
		},
		files: map[string]string{"report.md": "# Tomorrow\n", "data/a.csv": "a\n", "data/new.csv": "n\n"},
	},
	{
		name: "additive update keeps unplanned outputs", workflow: planner.Additive,
		before: func(t *testing.T, root string) {
			b, _ := local.New(root)
			if _, err := publish(t, b, planner.Additive, map[string]string{"report.md": "# Today\n", "data/keep.csv": "k\n"}, fixedNow.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
		},
		files: map[string]string{"report.md": "# Tomorrow\n", "data/more.csv": "m\n"},
	},
	{
		name: "legacy replacement first run clears the root", workflow: planner.Replacement,
		before: func(t *testing.T, root string) {
			testenv.WriteFiles(t, root, map[string]string{
				".distributor.json": `{"schema_version": 3, "owners": {}}`,
				"old/page.html":     "legacy", "report.md": "legacy report",
			})
		},
		files: map[string]string{"report.md": "# Tomorrow\n", "data/a.csv": "a\n"},
	},
	{
		name: "legacy additive first run overwrites planned paths only", workflow: planner.Additive,
		before: func(t *testing.T, root string) {
			testenv.WriteFiles(t, root, map[string]string{
				".distributor.json": `{"schema_version": 2}`,
				"old/page.html":     "legacy", "report.md": "legacy report",
			})
		},
		files: map[string]string{"report.md": "# Tomorrow\n", "data/a.csv": "a\n"},
	},
	// A catalog past streamMin records is encoded into its temp file
	// beside the writes (prepareStream); the replaced outputs and the
	// old catalog are swapped out and removed in the background.
	{
		name: "replacement republish of a catalog encoded as it is written", workflow: planner.Replacement,
		before: publishedBefore(planner.Replacement, largeTree(0)), files: largeTree(1), streamMin: 8,
	},
	// publish_last: a kill between two groups leaves the earlier groups
	// visible and the later ones not yet.
	{
		name: "replacement in publish_last groups", workflow: planner.Replacement, publishLast: []string{"**/*.csv", "report.html"},
		before: publishedBefore(planner.Replacement, map[string]string{"report.md": "# Today\n", "data/a.csv": "a\n", "data/old.csv": "x\n", "notes.txt": "n\n"}),
		files:  map[string]string{"report.md": "# Tomorrow\n", "data/a.csv": "a2\n", "data/new.csv": "n\n", "notes.txt": "n2\n"},
	},
	// retain_previous: the dropped paths are recorded retired before the
	// commit; the due ones of earlier runs are swept after it.
	{
		name: "replacement retaining what it drops, sweeping what is due", workflow: planner.Replacement, retain: 10 * time.Second,
		before: func(t *testing.T, root string) {
			b, _ := local.New(root)
			for i, files := range []map[string]string{
				{"data/a.csv": "a\n", "data/old1.csv": "1\n", "data/old2.csv": "2\n"},
				{"data/a.csv": "a\n", "data/old2.csv": "2\n"},
				{"data/a.csv": "a\n", "data/b.csv": "b\n"},
			} {
				spec := publicationSpec{workflow: planner.Replacement, eventID: fmt.Sprint("ev-before-", i), retain: 10 * time.Second}
				if _, err := runPublication(t, b, heldLease{}, spec, files, fixedNow.Add(time.Duration(i-3)*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			testenv.WriteFiles(t, root, map[string]string{"unmanaged/notes.txt": "mine"})
		},
		files: map[string]string{"data/a.csv": "a2\n", "data/c.csv": "c\n"},
	},
	// File <-> folder: the displaced delete runs before the write; a kill
	// between them must converge too.
	{
		name: "replacement managed files become folders", workflow: planner.Replacement,
		before: publishedBefore(planner.Replacement, map[string]string{"docs": "file\n", "a": "a file\n", "keep.txt": "k\n"}),
		files:  map[string]string{"docs/index.txt": "index\n", "a/b/c": "deep\n", "keep.txt": "k\n"},
	},
	{
		name: "replacement managed folders become files", workflow: planner.Replacement,
		before: publishedBefore(planner.Replacement, map[string]string{"docs/index.txt": "index\n", "docs/sub/more.txt": "m\n", "a/b/c": "deep\n"}),
		files:  map[string]string{"docs": "file\n", "a": "a file\n"},
	},
	{
		name: "additive managed files become folders", workflow: planner.Additive,
		before: publishedBefore(planner.Additive, map[string]string{"docs": "file\n", "a": "a file\n", "keep.txt": "k\n"}),
		files:  map[string]string{"docs/index.txt": "index\n", "a/b/c": "deep\n"},
	},
	{
		name: "additive managed folders become files", workflow: planner.Additive,
		before: publishedBefore(planner.Additive, map[string]string{"docs/index.txt": "index\n", "docs/sub/more.txt": "m\n", "keep.txt": "k\n"}),
		files:  map[string]string{"docs": "file\n"},
	},
	{
		name: "legacy replacement first run displaces a file in the way", workflow: planner.Replacement,
		before: func(t *testing.T, root string) {
			testenv.WriteFiles(t, root, map[string]string{
				".distributor.json": `{"schema_version": 3, "owners": {}}`,
				"docs":              "legacy", "old/page.html": "legacy",
			})
		},
		files: map[string]string{"docs/index.txt": "index\n"},
	},
	{
		name: "legacy additive first run displaces a folder in the way", workflow: planner.Additive,
		before: func(t *testing.T, root string) {
			testenv.WriteFiles(t, root, map[string]string{
				".distributor.json": `{"schema_version": 2}`,
				"docs/a.html":       "legacy", "docs/b/c.html": "legacy", "other.html": "legacy",
			})
		},
		files: map[string]string{"docs": "file\n"},
	},
}

// largeTree is 24 outputs in 4 folders; version v changes nine of them
// (a stage of 8 files or more swaps its replacements in), adds one and
// drops one.
func largeTree(v int) map[string]string {
	files := make(map[string]string, 25)
	for i := range 24 {
		files[fmt.Sprintf("data/%d/f%02d.csv", i%4, i)] = fmt.Sprintf("row %d\n", i)
	}
	if v > 0 {
		for _, i := range []int{0, 2, 5, 7, 10, 13, 16, 18, 21} {
			files[fmt.Sprintf("data/%d/f%02d.csv", i%4, i)] = fmt.Sprintf("row %d, version %d\n", i, v)
		}
		files["data/new.csv"] = "new\n"
		delete(files, "data/3/f23.csv")
	}
	return files
}

// publishedBefore prepares a root holding an earlier publication of files,
// plus an unmanaged file.
func publishedBefore(wf planner.Workflow, files map[string]string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		b, _ := local.New(root)
		if _, err := publish(t, b, wf, files, fixedNow.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		testenv.WriteFiles(t, root, map[string]string{"unmanaged/notes.txt": "mine"})
	}
}

// TestCrashAtEveryStepConverges kills a publication before each of its
// mutating storage calls in turn, then reruns it, and checks the engine's
// crash consistency: the catalog is always a whole valid version, the retry
// never collides with distributor's own bytes, and the end state is byte for
// byte what an uninterrupted run produces.
func TestCrashAtEveryStepConverges(t *testing.T) {
	t.Parallel()
	wrap := func(d *dyingBackend) storage.Backend { return d }
	// Each publication plans with the whole catalog (a small root's way)
	// and with what its plan selects of a streamed one (a large root's).
	var scenarios []scenario
	for _, sc := range crashScenarios {
		streamed := sc
		streamed.name, streamed.streamed = sc.name+"/streamed", true
		scenarios = append(scenarios, sc, streamed)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			prepare := func() string {
				root := t.TempDir()
				if sc.before != nil {
					sc.before(t, root)
				}
				return root
			}
			// The uninterrupted run, counting its mutating calls.
			refRoot := prepare()
			lb, _ := local.New(refRoot)
			counter := &dyingBackend{Backend: lb}
			if _, err := sc.publish(t, wrap(counter)); err != nil {
				t.Fatalf("uninterrupted run: %v", err)
			}
			want := snapshot(t, refRoot)
			steps := counter.calls
			if steps < 3 {
				t.Fatalf("uninterrupted run made only %d mutating calls; the scenario tests nothing", steps)
			}
			for k := 1; k <= steps; k++ {
				root := prepare()
				before := snapshot(t, root)
				lb, _ := local.New(root)
				crashing := &dyingBackend{Backend: lb, killAt: k}
				_, err := sc.publish(t, wrap(crashing))
				// The calls after the commit remove the intent, and those
				// beside it save the fingerprint index; their failure is
				// logged, not returned: the publication fails exactly when
				// its commit did not happen. (The index is saved while
				// the catalog is committed, so its calls and the commit's
				// may come in either order.)
				committed := crashing.committedAt > 0
				if !committed && !errors.Is(err, errKilled) || committed && err != nil {
					t.Fatalf("crash before call %d/%d: publish returned %v (committed: %v)", k, steps, err, committed)
				}
				// Only the index's calls may come before the commit.
				if k <= counter.committedAt-counter.fingerprintCalls && committed || k > counter.committedAt+counter.fingerprintCalls && !committed {
					t.Fatalf("crash before call %d/%d: committed %v, but the uninterrupted run committed at call %d (%d index writes beside it)",
						k, steps, committed, counter.committedAt, counter.fingerprintCalls)
				}
				// The catalog on disk is a whole old or whole new version.
				if data, err := os.ReadFile(filepath.Join(root, catalog.FileName)); err == nil {
					if _, _, err := catalog.Parse(data); err != nil && before[catalog.FileName] != string(data) {
						t.Fatalf("crash before call %d: catalog is neither valid nor the old file: %v", k, err)
					}
				}
				// Unmanaged content is never modified (legacy clearing aside).
				if sc.before != nil && !strings.HasPrefix(sc.name, "legacy") {
					if got := snapshot(t, root)["unmanaged/notes.txt"]; got != before["unmanaged/notes.txt"] {
						t.Fatalf("crash before call %d: unmanaged file changed to %q", k, got)
					}
				}
				// A kill inside a write leaves its temp file (the dying
				// backend fails calls instead): one beside the catalog and
				// one beside an output, as old as a crash an hour ago. Every
				// write that can leave one runs under an intent.
				if intentPending(t, root) {
					old := time.Now().Add(-2 * time.Hour)
					plantTemp(t, root, catalog.TempPrefix+"KILLED", old)
					// (Unless a file is still where that folder goes: no
					// write into it began.)
					dir := path.Dir(slices.Sorted(maps.Keys(sc.files))[0])
					if fi, err := os.Stat(filepath.Join(root, dir)); errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir() {
						plantTemp(t, root, path.Join(dir, catalog.TempPrefix+"KILLED2"), old)
					}
				}
				// Retry on a healthy backend.
				lb2, _ := local.New(root)
				if _, err := sc.publish(t, lb2); err != nil {
					t.Fatalf("retry after crash before call %d/%d: %v", k, steps, err)
				}
				if got := snapshot(t, root); diff(got, want) != "" {
					t.Fatalf("crash before call %d/%d, then retry: state differs from an uninterrupted run:\n%s", k, steps, diff(got, want))
				}
				if intentPending(t, root) {
					t.Fatalf("crash before call %d: intent left behind after the retry", k)
				}
				if left := tempFiles(t, root); len(left) > 0 {
					t.Fatalf("crash before call %d: temp files left behind after the retry: %q", k, left)
				}
			}
		})
	}
}

// TestRetryAfterCrashDoesNotCollideWithItsOwnBytes is the sharpest case:
// the first run dies right after writing a new output, before the catalog
// knows it. Without the intent, the retry would see an unmanaged file.
func TestRetryAfterCrashDoesNotCollideWithItsOwnBytes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	lb, _ := local.New(root)
	files := map[string]string{"data/a.csv": "a\n"}
	crashing := &dyingBackend{Backend: lb, atCommit: true}
	if _, err := publish(t, crashing, planner.Additive, files, fixedNow); !errors.Is(err, errKilled) {
		t.Fatalf("got %v, want crash", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data/a.csv")); err != nil {
		t.Fatalf("the output should have landed before the crash: %v", err)
	}
	res, err := publish(t, lb, planner.Additive, files, fixedNow)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !res.Recovered {
		t.Fatal("retry did not report recovering the interrupted run")
	}
	if len(res.Plan.Collisions) != 0 {
		t.Fatalf("retry collided with its own bytes: %v", res.Plan.Collisions)
	}
	if n := len(res.Plan.Writes()); n != 0 {
		t.Fatalf("retry rewrote %d outputs; the landed bytes were already right", n)
	}
	// The retry of the same event reports what its interrupted run wrote.
	if len(res.Written) != 1 || res.Written[0].Path != "data/a.csv" || res.Unchanged != 0 {
		t.Fatalf("retry reported written %v, unchanged %d; want data/a.csv written by this event", res.Written, res.Unchanged)
	}
}

// failOncePut fails the first Put of one path with a transient error.
type failOncePut struct {
	storage.Backend
	path   string
	mu     sync.Mutex
	failed bool
}

// fail reports whether the write of p fails (the first one of path).
func (f *failOncePut) fail(p string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p == f.path && !f.failed {
		f.failed = true
		return true
	}
	return false
}

func (f *failOncePut) Put(ctx context.Context, p string, r io.Reader, size int64, o storage.PutOptions) (storage.ObjectInfo, error) {
	if f.fail(p) {
		return storage.ObjectInfo{}, fmt.Errorf("injected: %w", storage.ErrUnavailable)
	}
	return f.Backend.Put(ctx, p, r, size, o)
}

// Stage fails the naming of the path's staged write instead.
func (f *failOncePut) Stage(ctx context.Context) storage.Stage {
	return hookedStage(f.Backend.Stage(ctx), func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		if f.fail(p) {
			return storage.ObjectInfo{}, fmt.Errorf("injected: %w", storage.ErrUnavailable)
		}
		return commit()
	})
}

// A retry of the same event after a transient write failure reports
// everything the event wrote, including what the failed attempt landed:
// downstream hears of each change exactly once, from the attempt that
// finishes.
func TestRetryOfSameEventReportsWritesOfTheFailedAttempt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	lb, _ := local.New(root)
	flaky := &failOncePut{Backend: lb, path: "b.txt"}
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	if _, err := publish(t, flaky, planner.Additive, files, fixedNow); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("first attempt: %v, want the injected transient error", err)
	}
	res, err := publish(t, flaky, planner.Additive, files, fixedNow)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	var got []string
	for _, it := range res.Written {
		got = append(got, it.Path)
	}
	sort.Strings(got)
	if want := []string{"a.txt", "b.txt", "c.txt"}; strings.Join(got, ",") != strings.Join(want, ",") || res.Unchanged != 0 {
		t.Fatalf("retry reported written %v, unchanged %d; want %v and 0", got, res.Unchanged, want)
	}
	if intentPending(t, root) {
		t.Fatal("intent left after the successful retry")
	}
}

// dyingOn is a dyingBackend over root that dies at its killAt-th mutating
// call.
func dyingOn(root storage.Backend, killAt int) storage.Backend {
	return &dyingBackend{Backend: root, killAt: killAt}
}

// Dispatch of the contract's calls to the hooks above.

func (d *dyingBackend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return d.hookWriteIntent(ctx, data)
	}
	return d.hookWriteIfVersion(ctx, p, data, want, opts...)
}

func (d *dyingBackend) DeleteIfVersion(ctx context.Context, p string, want storage.Version, opts ...storage.Option) error {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return d.hookClearIntent(ctx, want)
	}
	return d.hookDeleteIfVersion(ctx, p, want, opts...)
}

func (d *dyingBackend) ReadVersion(ctx context.Context, p string, opts ...storage.Option) ([]byte, storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return d.hookReadIntent(ctx)
	}
	return d.hookReadVersion(ctx, p, opts...)
}

// Put takes the in-place writes to hookOverwrite.
func (d *dyingBackend) Put(ctx context.Context, p string, body io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if opts.InPlace {
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.ObjectInfo{}, err
		}
		return storage.ObjectInfo{Path: p, Size: int64(len(data))}, d.hookOverwrite(ctx, p, data)
	}
	return d.hookPut(ctx, p, body, size, opts)
}
