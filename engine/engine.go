package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
	"github.com/distributor/distributor/storage"
)

var (
	// ErrCollision: desired paths exist as unmanaged content; nothing was written.
	ErrCollision = errors.New("collision with unmanaged content")

	// ErrCatalogRace: the catalog changed between read and commit.
	ErrCatalogRace = errors.New("catalog changed during the publication (lost compare-and-swap)")

	// ErrSuperseded: a replacement's owner already holds a newer version
	// of the same source; nothing was written (an additive publication
	// keeps the newer version's paths instead and is not refused). Errors
	// wrapping it are *SupersededError.
	ErrSuperseded = errors.New("superseded")
)

// SupersededError is a publication refused because the destination already
// holds a newer version of the same source (see planner.Newer).
type SupersededError struct {
	Root   string
	Owner  catalog.Owner
	Source catalog.Source // the publication's (older) version
	By     catalog.Source // the version that stays
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("%s: %s in %s already has %s created %s (digest %s), newer than this bundle's created %s (digest %s); nothing changed",
		ErrSuperseded, e.Owner, e.Root, e.By.ID, catalog.FormatTime(e.By.Created), e.By.Digest,
		catalog.FormatTime(e.Source.Created), e.Source.Digest)
}

// Is makes errors.Is(err, ErrSuperseded) hold.
func (e *SupersededError) Is(target error) bool { return target == ErrSuperseded }

// epoch stands in for required times in documents that have none.
var epoch = time.Unix(0, 0).UTC()

// Engine executes plans against storage.
type Engine struct {
	// Now is the clock; times are truncated to seconds for the catalog.
	Now func() time.Time

	// Version is written into catalogs as distributor_version.
	Version string

	// Workers bounds concurrent object writes (default 4).
	Workers int

	// LeftoverAge is how long a temp file or unfinished upload must be
	// untouched before it is removed as an interrupted write's leftover
	// (default DefaultLeftoverAge; see Leftovers in the package doc).
	LeftoverAge time.Duration
	Log         zerolog.Logger
}

// Output is one desired output and where its bytes come from.
type Output struct {
	planner.Desired

	// Content holds a generated output's bytes; nil means "copy Desired.From
	// from the bundle".
	Content []byte
}

// Publication is one bundle going to one destination root.
type Publication struct {
	Owner         catalog.Owner
	Workflow      planner.Workflow
	Source        catalog.Source
	BundleEventID string
	Outputs       []Output
	Bundle        *bundle.Bundle
	MaxDeletes    int
	TakeOwnership bool
	AllowOlder    bool

	// DeleteLater, with AllowOlder on an additive root, also deletes the
	// owner's paths that only newer versions of the source wrote
	// (planner.Input.DeleteLater).
	DeleteLater bool
}

// Result says what a publication did.
type Result struct {
	Root      string
	Plan      planner.Plan
	Written   []planner.Item // outputs whose bytes were written
	Updated   []planner.Item // records updated without a byte write
	Deleted   []string       // managed outputs (and legacy leftovers) deleted
	Unchanged int

	// KeptNewer counts the planned paths an older additive publication
	// left to the newer version of its source that wrote them.
	KeptNewer int
	Recovered bool // an interrupted earlier run was rolled forward first

	// LeaseToken is the fencing token of the root's lease, once it was
	// held (by the service).
	LeaseToken string

	// Kept is the encoded result an earlier attempt of this publication
	// finished with and could not deliver (Engine.KeepResult); when set,
	// this run changed nothing and the rest of Result is empty.
	Kept []byte
}

func (e *Engine) now() time.Time {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return now().UTC().Truncate(time.Second)
}

// state is what a root holds before planning.
type state struct {
	cat     *catalog.Catalog // nil when absent or legacy
	legacy  bool
	version storage.Version
}

func readState(ctx context.Context, root storage.Backend) (state, error) {
	data, v, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil {
		return state{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	return parseState(root, data, v)
}

// parseState parses the catalog bytes read at version v (none: v is "").
func parseState(root storage.Backend, data []byte, v storage.Version) (state, error) {
	if v == "" {
		return state{}, nil
	}
	cat, legacy, err := catalog.ParseOwned(data) // data is ours: the records point into it
	if err != nil {
		return state{}, fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
	}
	return state{cat: cat, legacy: legacy, version: v}, nil
}

// findStored returns what the planner needs to know of the root
// (storage.Backend.Find): what is at, above and below paths, sorted (nil:
// every object), given what the catalog says the root holds, and which
// of those objects are symbolic links (they are objects too: they occupy
// their path). The map is sized for hint objects.
func findStored(ctx context.Context, root storage.Backend, paths []string, held storage.Held, hint int) (map[string]planner.Stored, []string, error) {
	stored := make(map[string]planner.Stored, hint)
	var links []string
	err := root.Find(ctx, storage.Query{Paths: paths, Held: held}, func(o storage.ObjectInfo) error {
		if !catalog.IsReserved(o.Path) {
			stored[o.Path] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
			if o.Symlink {
				links = append(links, o.Path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", root, err)
	}
	return stored, links, nil
}

// heldBy tells Find what cat (nil: none) says the root holds.
func heldBy(cat *catalog.Catalog) storage.Held {
	if cat == nil {
		return storage.Held{}
	}
	return storage.Held{AtMost: len(cat.Outputs), Paths: outputPaths(cat)}
}

// outputPaths returns cat's records' paths as storage.Held takes them.
func outputPaths(cat *catalog.Catalog) func() (int, func(int) string) {
	return func() (int, func(int) string) {
		if cat == nil {
			return 0, func(int) string { return "" }
		}
		return len(cat.Outputs), func(i int) string { return cat.Outputs[i].Path }
	}
}

// parsedState is a catalog parsed in the background.
type parsedState struct {
	st  state
	err error
}

// found is what a Find in the background found.
type found struct {
	stored map[string]planner.Stored
	links  []string
	err    error
}

// catalogRead is the catalog's bytes and version as ReadVersion returned
// them.
type catalogRead struct {
	data []byte
	v    storage.Version
	err  error
}

// readAndFind reads the catalog and finds what is stored at the
// publication's paths while the catalog is parsed and then whileFinding
// runs on the state read (two cores). outputs gives the publication's
// outputs; it may wait for a bundle still being opened, beside the parse.
// read, when set, gives the catalog already read (or being read).
func readAndFind(ctx context.Context, root storage.Backend, outputs func() ([]Output, error), whileFinding func(state) error, read func() catalogRead) (state, found, error) {
	if read == nil {
		read = func() catalogRead {
			data, v, err := root.ReadVersion(ctx, catalog.FileName)
			return catalogRead{data, v, err}
		}
	}
	cr := read()
	data, v, err := cr.data, cr.v, cr.err
	if err != nil {
		return state{}, found{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	ch := make(chan parsedState, 1)
	go func() {
		st, err := parseState(root, data, v)
		ch <- parsedState{st, err}
	}()
	var once sync.Once
	var parsed parsedState
	wait := func() parsedState {
		once.Do(func() { parsed = <-ch })
		return parsed
	}
	outs, err := outputs()
	if err != nil {
		wait() // nothing outlives the call
		return state{}, found{}, err
	}
	var held storage.Held
	if v != "" {
		held = storage.Held{AtMost: catalog.MaxRecords(len(data)), Paths: func() (int, func(int) string) {
			return outputPaths(wait().st.cat)()
		}}
	}
	paths := make([]string, len(outs))
	for i, o := range outs {
		paths[i] = o.Path
	}
	if !slices.IsSorted(paths) {
		slices.Sort(paths)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan found, 1)

	// Sized for the records the catalog's bytes suggest (~550 bytes each),
	// or for about the paths asked about, when fewer: a backend that looks
	// them up reports little more.
	hint := min(len(data)/512, 2*len(paths))
	go func() {
		stored, links, err := findStored(fctx, root, paths, held, hint)
		done <- found{stored, links, err}
	}()
	p := wait()
	err = p.err
	if err == nil {
		err = whileFinding(p.st)
	}
	if err != nil {
		cancel()
		<-done // nothing outlives the call
		return state{}, found{}, err
	}
	f := <-done
	return p.st, f, f.err
}

// Plan computes the publication's plan without changing anything.
func (e *Engine) Plan(ctx context.Context, root storage.Backend, pub Publication) (planner.Plan, error) {
	pl, err := e.plan(ctx, root, &pub, nil, nil)
	return pl.Plan, err
}

// planned is a plan with what it was made from.
type planned struct {
	planner.Plan
	st     state
	stored map[string]planner.Stored

	// fps is the part of the root's fingerprint index this publication
	// loaded (see Fingerprints in the package doc).
	fps *fingerprints
}

// plan plans *pub. await, when set, completes *pub (its bundle was still
// being opened): it is called once the catalog is read.
func (e *Engine) plan(ctx context.Context, root storage.Backend, pub *Publication, await func() error, read func() catalogRead) (planned, error) {
	var pl planned
	var err error
	outputs := func() ([]Output, error) {
		if await != nil {
			if err := await(); err != nil {
				return nil, err
			}
		}
		return pub.Outputs, nil
	}

	// The index layout follows the catalog read. A publication of many
	// outputs reads every shard anyway (it keeps outputs in all of them):
	// it reads them while the root is listed. So does any publication to
	// an index of one shard: it reads that shard to check the outputs it
	// keeps or to update those it writes, after the listing otherwise.
	preload := func(st state) error {
		n := 0
		if st.cat != nil {
			n = len(st.cat.Outputs)
		}
		pl.fps = newFingerprints(FingerprintShards(n))
		if pl.fps.shards > 1 && (st.cat == nil || len(pub.Outputs) < 4*pl.fps.shards) {
			return nil
		}
		if err := e.loadShards(ctx, root, pl.fps, allShards(pl.fps.shards)); err != nil {
			return fmt.Errorf("check stored outputs in %s: %w", root, err)
		}
		return nil
	}
	var f found
	if pl.st, f, err = readAndFind(ctx, root, outputs, preload, read); err != nil {
		return pl, err
	}
	pl.stored = f.stored
	desired := make([]planner.Desired, len(pub.Outputs))
	for i, o := range pub.Outputs {
		desired[i] = o.Desired
	}
	in := planner.Input{
		Owner: pub.Owner, Source: pub.Source, Workflow: pub.Workflow, Desired: desired,
		Catalog: pl.st.cat, Legacy: pl.st.legacy, Stored: pl.stored, Now: e.now(),
		MaxDeletes: pub.MaxDeletes, TakeOwnership: pub.TakeOwnership, AllowOlder: pub.AllowOlder,
		DeleteLater: pub.DeleteLater, DistributorVersion: e.Version,
	}

	// The kept outputs are checked on the other core while the plan is
	// made: a damaged one (rare: a stale writer or a hand edit) is marked
	// and the plan made again, so that it rewrites it.
	var damaged []string
	kept := make(chan error, 1)
	go func() {
		var err error
		damaged, err = e.checkKept(ctx, root, pl.st.cat, pub.Outputs, pl.stored, pl.fps)
		kept <- err
	}()
	pl.Plan, err = planner.Build(in)
	if kerr := <-kept; kerr != nil {
		pl.Plan = planner.Plan{}
		return pl, fmt.Errorf("check stored outputs in %s: %w", root, kerr)
	}
	if len(damaged) > 0 {
		for _, p := range damaged {
			s := pl.stored[p]
			s.Damaged = true
			pl.stored[p] = s
		}
		pl.Plan, err = planner.Build(in)
	}
	if err != nil {
		return pl, fmt.Errorf("%s: %w", root, err)
	}
	return pl, refuseSymlinks(ctx, root, pl.Plan, pl.stored, f.links)
}

// Publish runs the publication on root under l. See intent.go for the order
// of writes and why it survives a crash at any point.
func (e *Engine) Publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication) (Result, error) {
	return e.publish(ctx, root, l, pub, nil)
}

// PublishOpening is Publish of a publication whose bundle is still being
// opened: head names its owner, workflow and options, and open blocks
// until the bundle is open and returns the whole publication. The run
// calls open once the catalog is read (the manifest's read and parse
// leave the critical path), or before it recovers an interrupted run: a
// bundle that turns out unusable changes nothing in the root.
func (e *Engine) PublishOpening(ctx context.Context, root storage.Backend, l lease.Lease, head Publication, open func() (Publication, error)) (Result, error) {
	return e.publish(ctx, root, l, head, open)
}

// publish is Publish of pub, which open (when set) completes.
func (e *Engine) publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, open func() (Publication, error)) (Result, error) {
	var spent string
	res, err := e.run(ctx, root, l, pub, open, &spent)

	// A successful result reports what earlier attempts changed: their
	// pending report is spent. A failed attempt leaves it for the next.
	if err == nil && spent != "" {
		if derr := root.Delete(context.WithoutCancel(ctx), spent); derr != nil {
			e.Log.Debug().Err(derr).Msg("could not remove a spent pending report")
		}
	}
	return res, err
}

func (e *Engine) workers() int {
	if e.Workers <= 0 {
		return 4
	}
	return e.Workers
}

// workersFor bounds the workers for n objects: no more than there is work.
func (e *Engine) workersFor(n int) int {
	return max(1, min(e.workers(), n))
}

// commit writes next as the root's catalog if the catalog is still at
// version (a compare-and-swap) and the lease holds: confirmed with the
// lease's store before the swap (lease.Lease.Confirm), so a holder
// whose lease was broken or taken while it was paused commits nothing,
// its recovery's commits included.
func (e *Engine) commit(ctx context.Context, root storage.Backend, l lease.Lease, next *catalog.Catalog, version storage.Version) error {
	pc := root.PrepareCatalog(ctx, catalogDocument(next), 0)
	defer pc.Close()
	return commitPending(ctx, root, l, confirming(ctx, l), pc, version)
}

// confirming starts l.Confirm in the background and returns its wait: a
// publication confirms while it writes, off its critical path. What the
// fence needs is a confirmation after the catalog that the commit swaps
// against was read: then a newer holder took the root after that read,
// and any commit of its makes this one's swap fail. Earlier than that
// read (a recovery reads the catalog a newer holder committed) it proves
// nothing.
func confirming(ctx context.Context, l lease.Lease) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- l.Confirm(ctx) }()
	return sync.OnceValue(func() error { return <-done })
}

// commitPending commits a catalog PrepareCatalog began, as commit does,
// once confirmed (confirming l) says the lease holds and l still does.
func commitPending(ctx context.Context, root storage.Backend, l lease.Lease, confirmed func() error, pc storage.PendingCatalog, version storage.Version) error {
	if err := confirmed(); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	_, err := pc.Commit(ctx, version)
	switch {
	case errors.Is(err, catalog.ErrInvalid):
		return fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
	case errors.Is(err, storage.ErrConflict):
		// Often how a holder paused past its lease meets a newer one:
		// then the lost lease is what it reports.
		if cerr := l.Confirm(context.WithoutCancel(ctx)); errors.Is(cerr, lease.ErrLost) {
			return fmt.Errorf("%w (%w: %s)", cerr, ErrCatalogRace, root)
		}
		return fmt.Errorf("%w: %s", ErrCatalogRace, root)
	case err != nil:
		return fmt.Errorf("commit %s in %s: %w", catalog.FileName, root, err)
	}
	return nil
}

// writeAll writes the plan's outputs, each only if its path still holds
// what the plan saw (nothing, or the listed version), and records the new
// versions in fps. With a stage, the outputs are staged already: writing
// one is naming it.
func (e *Engine) writeAll(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, writes []planner.Item, content map[string][]byte, stored map[string]planner.Stored, fps *fingerprints, stg *staged) ([]planner.Item, error) {
	var mu sync.Mutex
	done := make([]planner.Item, 0, len(writes))
	err := e.forEach(ctx, len(writes), func(ctx context.Context, i int) error {
		it := writes[i]
		if err := l.Err(); err != nil {
			return err
		}
		var oi storage.ObjectInfo
		var err error
		if stg != nil {
			oi, err = stg.commit(ctx, root, it)
		} else {
			s, exists := stored[it.Path]
			oi, err = e.writeOne(ctx, root, pub, it, content[it.Path], s, exists)
		}
		if err != nil {
			return err
		}
		progress.Add(ctx, 1, it.Desired.Size)
		mu.Lock()
		done = append(done, it)
		if oi.Fingerprint != "" {
			fps.set(it.Path, known{fingerprint: oi.Fingerprint, sha256: it.Record.SHA256})
		}
		mu.Unlock()
		return nil
	})
	sort.Slice(done, func(i, j int) bool { return done[i].Path < done[j].Path })
	return done, err
}

// forEach runs fn for 0..n-1 on at most e.workers() goroutines that each
// take the next index until none is left or one fails (which cancels
// ctx for the others). Long-lived workers, not one goroutine per object:
// each would grow its stack again through the deep write path.
func (e *Engine) forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if e.workersFor(n) == 1 {
		// One worker: the caller's goroutine, whose stack has grown already.
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil // as the workers below: a cancelled run stops taking work
			}
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range e.workersFor(n) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || gctx.Err() != nil {
					return nil
				}
				if err := fn(gctx, i); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// staged is a stage of a publication's writes.
type staged struct {
	storage.Stage
}

// stageAll stages every write. A bundle file whose bytes are not the
// manifest's fails its Put (bundle.Open verifies while streaming), before
// anything is visible. A backend that keeps nothing of a file's bytes
// opens it again when it names it (storage.Source).
func (e *Engine) stageAll(ctx context.Context, root storage.Backend, stg *staged, pub Publication, writes []planner.Item, content map[string][]byte, stored map[string]planner.Stored) error {
	return e.forEach(ctx, len(writes), func(ctx context.Context, i int) error {
		it := writes[i]
		var first *sourceReader // the bytes Put checks: the bundle's own error is its
		open := func(ctx context.Context) (io.ReadCloser, error) {
			r, done, err := source(ctx, pub, it, content[it.Path])
			if err != nil {
				return nil, err
			}
			src := &sourceReader{r: r, done: done}
			if first == nil {
				first = src
			}
			return src, nil
		}
		s, exists := stored[it.Path]
		opts := putOptions(it, s, exists)
		opts.SourceVerified = content[it.Path] == nil // bundle.Open checks the digest itself
		_, err := stg.Put(ctx, it.Path, open, it.Desired.Size, opts)
		if first != nil && first.err != nil && !errors.Is(first.err, io.EOF) && errors.Is(err, first.err) {
			return first.err // the bundle's own error (a damaged file), as the verification pass reports it
		}
		if err != nil {
			return writeError(root, it, err)
		}
		if _, generated := content[it.Path]; !generated {
			progress.Add(ctx, 1, it.Desired.Size) // the "checking bundle" stage: this copy is verified
		}
		return nil
	})
}

// sourceReader remembers the error its source gave.
type sourceReader struct {
	r    io.Reader
	done func()
	err  error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *sourceReader) Close() error {
	s.done()
	return nil
}

// commit names one staged output.
func (stg *staged) commit(ctx context.Context, root storage.Backend, it planner.Item) (storage.ObjectInfo, error) {
	oi, err := stg.Commit(ctx, it.Path)
	if err != nil {
		return oi, writeError(root, it, err)
	}
	return oi, nil
}

// verifyCopies reads and hashes the bundle files to be copied.
func (e *Engine) verifyCopies(ctx context.Context, b *bundle.Bundle, paths []string) error {
	return e.forEach(ctx, len(paths), func(ctx context.Context, i int) error {
		r, err := b.Open(ctx, paths[i])
		if err != nil {
			return err
		}
		defer r.Close()
		n, err := io.Copy(io.Discard, r)
		progress.Add(ctx, 1, n)
		return err
	})
}

// writeOne writes one output on the condition that its path still holds
// what the plan saw: nothing (a new path), or the stored version s. A
// holder that lost its lease mid-write then cannot land on a newer
// holder's work (the fingerprint index covers what conditions cannot: see
// Fingerprints in the package doc).
func (e *Engine) writeOne(ctx context.Context, root storage.Backend, pub Publication, it planner.Item, data []byte, s planner.Stored, exists bool) (storage.ObjectInfo, error) {
	r, done, err := source(ctx, pub, it, data)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer done()
	opts := putOptions(it, s, exists)
	opts.SourceVerified = data == nil // bundle.Open checks the digest itself
	oi, err := root.Put(ctx, it.Path, r, it.Desired.Size, opts)
	if err != nil {
		return oi, writeError(root, it, err)
	}
	return oi, nil
}

// source returns the bytes of one output: its generated content, or its
// bundle file (verified while read).
func source(ctx context.Context, pub Publication, it planner.Item, data []byte) (io.Reader, func(), error) {
	if data != nil {
		return bytes.NewReader(data), func() {}, nil
	}
	rc, err := pub.Bundle.Open(ctx, it.Desired.From)
	if err != nil {
		return nil, nil, err
	}
	return rc, func() { rc.Close() }, nil
}

// putOptions are one output's write options: deferred sync (one barrier
// for the publication), and the condition that its path still holds what
// the plan saw.
func putOptions(it planner.Item, s planner.Stored, exists bool) storage.PutOptions {
	return storage.PutOptions{SHA256: it.Desired.SHA256, ContentType: mime.TypeByExtension(path.Ext(it.Path)), DeferSync: true,
		IfAbsent: !exists, IfMatch: s.Fingerprint}
}

func writeError(root storage.Backend, it planner.Item, err error) error {
	if errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("write %s in %s: %w: it changed since the plan (another writer); the retry re-plans", it.Path, root, err)
	}
	return fmt.Errorf("write %s in %s: %w", it.Path, root, err)
}

// Recover rolls an interrupted publication's intent forward (see Crash
// consistency in the package doc).
// It reports whether there was anything to recover.
func (e *Engine) Recover(ctx context.Context, root storage.Backend, l lease.Lease) (bool, error) {
	r, err := e.recover(ctx, root, l, true)
	return r.found, err
}

// without returns paths minus those in drop (both sorted).
func without(paths, drop []string) []string {
	if len(drop) == 0 {
		return paths
	}
	var out []string
	for _, p := range paths {
		if _, found := sort.Find(len(drop), func(i int) int { return strings.Compare(p, drop[i]) }); !found {
			out = append(out, p)
		}
	}
	return out
}

// collisionError explains a blocked plan. Content in the way of a file or
// folder cannot be adopted, so only plain collisions suggest
// --take-ownership.
func collisionError(root storage.Backend, p planner.Plan) error {
	var taken, tree, way []string
	for _, it := range p.Items {
		switch {
		case it.Action != planner.Collision:
		case len(it.InTheWay) > 0:
			tree = append(tree, it.Path)
			way = append(way, it.InTheWay...)
		default:
			taken = append(taken, it.Path)
		}
	}
	var parts []string
	if len(taken) > 0 {
		parts = append(parts, fmt.Sprintf("%d planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): %s", len(taken), summarize(taken)))
	}
	if len(tree) > 0 {
		slices.Sort(way)
		parts = append(parts, fmt.Sprintf("%d planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): %s, in the way: %s", len(tree), summarize(tree), summarize(slices.Compact(way))))
	}
	return fmt.Errorf("%w in %s: %s", ErrCollision, root, strings.Join(parts, "; "))
}

// itemAt finds the plan item at path (items are sorted by path).
func itemAt(items []planner.Item, path string) (planner.Item, bool) {
	i := sort.Search(len(items), func(i int) bool { return items[i].Path >= path })
	if i < len(items) && items[i].Path == path {
		return items[i], true
	}
	return planner.Item{}, false
}

func summarize(paths []string) string {
	const max = 5
	if len(paths) <= max {
		return fmt.Sprintf("%q", paths)
	}
	return fmt.Sprintf("%q and %d more", paths[:max], len(paths)-max)
}
