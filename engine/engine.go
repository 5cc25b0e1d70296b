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
	// ErrSuperseded: the owner already holds a newer version of the same
	// source; nothing was written. Errors wrapping it are *SupersededError.
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
	// streamMin overrides streamMinOutputs when positive (tests: a small
	// root takes a large catalog's path).
	streamMin int
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
}

// Result says what a publication did.
type Result struct {
	Root      string
	Plan      planner.Plan
	Written   []planner.Item // outputs whose bytes were written
	Updated   []planner.Item // records updated without a byte write
	Deleted   []string       // managed outputs (and legacy leftovers) deleted
	Unchanged int
	Recovered bool // an interrupted earlier run was rolled forward first
	// LeaseToken is the fencing token of the root's lease, once it was
	// held (Runner.Publish).
	LeaseToken string
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

// listStored lists the root. cat (nil: none) tells a SplitLister where
// to split the listing (catalogSplits). The map is sized for cat's
// records, or else for hint objects.
func listStored(ctx context.Context, root storage.Backend, cat *catalog.Catalog, hint int) (map[string]planner.Stored, error) {
	if cat != nil {
		hint = len(cat.Outputs)
	}
	return listStoredSplit(ctx, root, catalogSplits(cat), hint)
}

// listStoredSplit lists the root, a SplitLister in the ranges between
// splits (none: one plain listing), into a map sized for hint objects.
func listStoredSplit(ctx context.Context, root storage.Backend, splits []string, hint int) (map[string]planner.Stored, error) {
	stored := make(map[string]planner.Stored, hint)
	add := func(o storage.ObjectInfo) error {
		if !catalog.IsReserved(o.Path) {
			stored[o.Path] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
		}
		return nil
	}
	var err error
	if sl, ok := root.(storage.SplitLister); ok && len(splits) > 0 {
		err = sl.ListSplit(ctx, splits, add)
	} else {
		err = root.List(ctx, "", add)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	return stored, nil
}

// listSplits picks, of n paths in order, every listSplit-th from the
// middle of the first page: the reserved files (.distributor…) sort
// before the outputs, and a first range of a whole page of outputs would
// take a second request, which the ranges after it wait for. Not the last
// path: the range after it would be one more request, for the objects
// past it (mostly none). None under two pages.
func listSplits(n int, path func(int) string) []string {
	if n < 2*listSplit {
		return nil
	}
	splits := make([]string, 0, n/listSplit+1)
	for i := listSplit/2 - 1; i < n-1; i += listSplit {
		splits = append(splits, path(i))
	}
	return splits
}

// catalogSplits: listSplits of the catalog's records (nil: none).
func catalogSplits(cat *catalog.Catalog) []string {
	if cat == nil {
		return nil
	}
	return listSplits(len(cat.Outputs), func(i int) string { return cat.Outputs[i].Path })
}

// outputSplits: listSplits of the publication's paths, in order.
func outputSplits(outs []Output) []string {
	paths := make([]string, len(outs))
	for i, o := range outs {
		paths[i] = o.Path
	}
	if !slices.IsSorted(paths) {
		slices.Sort(paths)
	}
	return listSplits(len(paths), func(i int) string { return paths[i] })
}

// listSplit: a split listing reads the records between two splits in one
// request (S3 answers 1,000 keys a page), if nothing else lies between.
const listSplit = 1000

// statRatio: a publication whose outputs number less than 1/statRatio of
// the catalog's records looks its paths up one by one instead of listing
// the root (1,000: a listing request returns about that many objects).
const statRatio = 1000

// minRecordBytes bounds a catalog record's size from below in any JSON
// form (two digests of 71 bytes, three times, the keys): a catalog of n
// bytes holds at most n/minRecordBytes records.
const minRecordBytes = 256

// listsAnyway reports whether a publication of n outputs lists the root
// whatever the catalog of size bytes (exists: there is one) turns out to
// hold: then the listing need not wait for the catalog's parse.
func listsAnyway(n, size int, exists bool) bool {
	return !exists || n*statRatio >= size/minRecordBytes
}

// parsedState is a catalog parsed in the background.
type parsedState struct {
	st  state
	err error
}

// errListingUnneeded: the publication is small against its catalog, so
// its paths are looked up one by one instead (storedFor).
var errListingUnneeded = errors.New("listing not needed")

// listing is a listing of the root run while the catalog is parsed.
type listing struct {
	stored map[string]planner.Stored
	err    error
}

// startListing lists the root in the background, split at splits (none:
// one plain listing); the channel yields the result once.
func startListing(ctx context.Context, root storage.Backend, splits []string, hint int) <-chan listing {
	ch := make(chan listing, 1)
	go func() {
		stored, err := listStoredSplit(ctx, root, splits, hint)
		ch <- listing{stored, err}
	}()
	return ch
}

// storedFor returns what the planner needs to know of the root: every
// object for a first or legacy run or a large publication, else only the
// outputs' paths, their folders and what lies below them — adding ten
// outputs to a root of a million must not cost a million stats.
func storedFor(ctx context.Context, root storage.Backend, st state, outs []Output) (map[string]planner.Stored, error) {
	if lists(st, len(outs)) {
		return listStored(ctx, root, st.cat, 0)
	}
	stored := map[string]planner.Stored{}
	seen := map[string]bool{}
	stat := func(p string) (bool, error) {
		if seen[p] {
			_, ok := stored[p]
			return ok, nil
		}
		seen[p] = true
		o, err := root.Stat(ctx, p)
		if errors.Is(err, storage.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		stored[p] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
		return true, nil
	}
	for _, o := range outs {
		p := o.Path
		var err error
		for i := strings.IndexByte(p, '/'); i >= 0 && err == nil; i = nextSlash(p, i) {
			_, err = stat(p[:i])
		}
		var found bool
		if err == nil {
			found, err = stat(p)
		}
		if err == nil && !found {
			// A folder (or nothing) at p: whatever is below it is in the way.
			err = root.List(ctx, p+"/", func(o storage.ObjectInfo) error {
				if !catalog.IsReserved(o.Path) {
					stored[o.Path] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
				}
				return nil
			})
		}
		if err != nil {
			// A path the root refuses (a symlink on the way, say): the
			// listing skips what it cannot use, as before.
			return listStored(ctx, root, st.cat, 0)
		}
	}
	return stored, nil
}

// lists reports whether a publication of n outputs lists the root
// (rather than stat its own paths) given the state read.
func lists(st state, n int) bool {
	return st.cat == nil || st.legacy || n*statRatio >= len(st.cat.Outputs)
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// readAndList reads the catalog and, when a publication of outs lists
// the root whatever the catalog holds, lists it while the catalog is
// parsed and whileListing runs on the state read (two cores: the
// listing's system calls and the parse overlap). stored is nil when the
// caller must still find what is stored.
// outputs gives the publication's outputs once the catalog is read: a
// bundle still being opened is waited for only then; known reports
// whether outputs would return at once.
func readAndList(ctx context.Context, root storage.Backend, outputs func() ([]Output, error), known func() bool, whileListing func(state) error) (state, map[string]planner.Stored, error) {
	data, v, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil {
		return state{}, nil, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	// The parse starts at once: a bundle still being opened (outputs waits
	// for it) is the other core's work meanwhile.
	parsed := make(chan parsedState, 1)
	go func() {
		st, err := parseState(root, data, v)
		parsed <- parsedState{st, err}
	}()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Sized for the records the catalog's bytes suggest (~550 bytes each).
	hint := len(data) / 512
	// A root listed in one pass (local: folders read and stat'ed, no
	// request per page) whose outputs are not known yet (a bundle still
	// being opened: a large manifest is still being parsed) starts its
	// listing now, beside the two parses, rather than once they are; a
	// publication that turns out too small to list stops it then. Known
	// outputs decide at once: ten outputs added to a root of a million
	// never start a listing.
	_, split := root.(storage.SplitLister)
	var ch <-chan listing
	if (!split || v == "") && !known() {
		ch = startListing(lctx, root, nil, hint)
	}
	outs, err := outputs()
	n := len(outs)
	if err == nil && !listsAnyway(n, len(data), v != "") {
		err = errListingUnneeded
	}
	if err != nil {
		cancel()
		if ch != nil {
			<-ch
		}
		p := <-parsed // nothing outlives the call
		if errors.Is(err, errListingUnneeded) {
			return p.st, nil, p.err
		}
		return state{}, nil, err
	}
	// A SplitLister (S3: a request per page) reads ranges 4 at once
	// instead of pages one after another. When the catalog holds at most
	// about twice the publication's outputs (the replacement of a root,
	// say; a record takes 256 bytes at least, ~500 in practice) it splits
	// at their paths and starts now; else it waits for the parse and
	// splits at the catalog's records: the publication's paths may sit
	// together in a much larger root. No catalog: nothing to split.
	switch {
	case ch != nil:
	case !split || v == "":
		ch = startListing(lctx, root, nil, hint)
	case n >= 2*listSplit && len(data)/minRecordBytes <= 4*n:
		ch = startListing(lctx, root, outputSplits(outs), hint)
	}
	p := <-parsed
	st, err := p.st, p.err
	if err == nil && ch == nil {
		ch = startListing(lctx, root, catalogSplits(st.cat), hint)
	}
	if err == nil {
		err = whileListing(st)
	}
	if err != nil {
		cancel()
		if ch != nil {
			<-ch // nothing outlives the call
		}
		return state{}, nil, err
	}
	// Should the bound have been loose (the catalog holds more than n *
	// statRatio records), the listing still tells the planner all it
	// needs: it is what storedFor falls back to.
	l := <-ch
	return st, l.stored, l.err
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
// being opened): it is called once the catalog is read; opened, when set,
// reports whether it would return at once.
func (e *Engine) plan(ctx context.Context, root storage.Backend, pub *Publication, await func() error, opened func() bool) (planned, error) {
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
	// it reads them while the root is listed.
	preload := func(st state) error {
		n := 0
		if st.cat != nil {
			n = len(st.cat.Outputs)
		}
		pl.fps = newFingerprints(FingerprintShards(n))
		if st.cat == nil || len(pub.Outputs) < 4*pl.fps.shards {
			return nil
		}
		if err := e.loadShards(ctx, root, pl.fps, allShards(pl.fps.shards)); err != nil {
			return fmt.Errorf("check stored outputs in %s: %w", root, err)
		}
		return nil
	}
	known := func() bool { return opened == nil || opened() }
	if pl.st, pl.stored, err = readAndList(ctx, root, outputs, known, preload); err != nil {
		return pl, err
	}
	if pl.stored == nil {
		if err = preload(pl.st); err != nil {
			return pl, err
		}
		if pl.stored, err = storedFor(ctx, root, pl.st, pub.Outputs); err != nil {
			return pl, err
		}
	}
	desired := make([]planner.Desired, len(pub.Outputs))
	for i, o := range pub.Outputs {
		desired[i] = o.Desired
	}
	in := planner.Input{
		Owner: pub.Owner, Source: pub.Source, Workflow: pub.Workflow, Desired: desired,
		Catalog: pl.st.cat, Legacy: pl.st.legacy, Stored: pl.stored, Now: e.now(),
		MaxDeletes: pub.MaxDeletes, TakeOwnership: pub.TakeOwnership, AllowOlder: pub.AllowOlder, DistributorVersion: e.Version,
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
	return pl, nil
}

// Publish runs the publication on root under l. See intent.go for the order
// of writes and why it survives a crash at any point.
func (e *Engine) Publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication) (Result, error) {
	return e.publish(ctx, root, l, pub, nil)
}

// publish is Publish of pub, which open (when set) completes.
func (e *Engine) publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, open *opening) (Result, error) {
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

// streamMinOutputs is the catalog size (records) above which a commit is
// encoded as it is written instead of whole (~0.5 KiB a record).
const streamMinOutputs = 2048

// streams reports whether a catalog of n records is encoded as it is
// written.
func (e *Engine) streams(n int) bool {
	if e.streamMin > 0 {
		return n > e.streamMin
	}
	return n > streamMinOutputs
}

func (e *Engine) commit(ctx context.Context, root storage.Backend, l lease.Lease, next *catalog.Catalog, version storage.Version) error {
	return e.commitPrepared(ctx, root, l, next, version, nil)
}

// prepareCatalog writes next's bytes ahead of the barrier (Sync) that
// precedes its commit, where the backend allows (storage.VersionPreparer:
// local roots): the barrier then makes them durable too, and the commit
// only names them and flushes the root folder (one fsync fewer). A large
// catalog is encoded as it is written (streamPreparer) when ahead is set
// (a barrier follows, and many writes to encode it beside), else left to
// the commit, which streams it with its writeback started every MiB and
// flushes it itself (a republish that only updates records, or adds a
// few outputs: there is nothing to write it beside, and a prepared one
// measured no faster). Nil when it is left to the commit; the caller
// must Close a non-nil result.
func (e *Engine) prepareCatalog(ctx context.Context, root storage.Backend, next *catalog.Catalog, ahead bool) (storage.PreparedVersion, error) {
	pr, ok := root.(storage.VersionPreparer)
	large := e.streams(len(next.Outputs))
	if sp, stream := root.(streamPreparer); ok && large && stream && ahead {
		pv, err := sp.PrepareVersionFrom(ctx, catalog.FileName, func(w io.Writer) error { return catalog.MarshalTo(w, next) })
		if errors.Is(err, catalog.ErrInvalid) {
			return nil, fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("commit %s in %s: %w", catalog.FileName, root, err)
		}
		return pv, nil
	}
	if _, stream := root.(storage.VersionStreamer); !ok || (stream && large) {
		return nil, nil
	}
	data, err := catalog.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
	}
	pv, err := pr.PrepareVersion(ctx, catalog.FileName, data)
	if err != nil {
		return nil, fmt.Errorf("commit %s in %s: %w", catalog.FileName, root, err)
	}
	return pv, nil
}

// streamPreparer is a storage.VersionPreparer that also takes the bytes
// from a writer (storage/local): a catalog of any size is prepared ahead
// of the barrier without being held whole.
type streamPreparer interface {
	PrepareVersionFrom(ctx context.Context, path string, write func(io.Writer) error) (storage.PreparedVersion, error)
}

// catalogPrep is the next catalog being prepared (prepareCatalog), in
// the background while the publication writes its outputs, or when first
// waited for.
type catalogPrep struct {
	start  func() // set until a deferred preparation runs
	done   chan struct{}
	cancel context.CancelFunc
	pv     storage.PreparedVersion
	err    error
}

// startCatalog begins prepareCatalog: in the background when ahead is
// set, else when first waited for.
func (e *Engine) startCatalog(ctx context.Context, root storage.Backend, next *catalog.Catalog, ahead bool) *catalogPrep {
	c := &catalogPrep{done: make(chan struct{}), cancel: func() {}}
	run := func(ctx context.Context) {
		defer close(c.done)
		c.pv, c.err = e.prepareCatalog(ctx, root, next, ahead)
	}
	if !ahead {
		c.start = func() { run(ctx) }
		return c
	}
	ctx, c.cancel = context.WithCancel(ctx)
	go run(ctx)
	return c
}

// wait returns prepareCatalog's result once it is done.
func (c *catalogPrep) wait() (storage.PreparedVersion, error) {
	if c.start != nil {
		start := c.start
		c.start = nil
		start()
	}
	<-c.done
	return c.pv, c.err
}

// close stops a preparation still under way and drops what it wrote unless
// it was committed.
func (c *catalogPrep) close() {
	if c == nil || c.start != nil { // none, or never begun
		return
	}
	c.cancel()
	if pv, _ := c.wait(); pv != nil {
		pv.Close()
	}
}

// commitPrepared is commit; prep, when set, holds next's bytes already
// (prepareCatalog).
func (e *Engine) commitPrepared(ctx context.Context, root storage.Backend, l lease.Lease, next *catalog.Catalog, version storage.Version, prep storage.PreparedVersion) error {
	sw, stream := root.(storage.VersionStreamer)
	// A small catalog is cheaper whole: streaming costs a pipe, a goroutine
	// and a 1 MiB buffer per commit, several times a small catalog's bytes.
	stream = stream && e.streams(len(next.Outputs)) && prep == nil
	var data []byte
	if !stream && prep == nil {
		var err error
		if data, err = catalog.Marshal(next); err != nil {
			return fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
		}
	}
	if err := l.Err(); err != nil {
		return err
	}
	// A root moved away (or re-pointed) since it was opened must not get the
	// catalog: the publication fails and its retry lands in the new root.
	if err := storage.CheckRoot(ctx, root); err != nil {
		return fmt.Errorf("commit %s: %w", catalog.FileName, err)
	}
	var err error
	switch {
	case prep != nil:
		_, err = prep.CommitIfVersion(ctx, version)
	case stream:
		// Encoded as it is written (half a gigabyte at a million records);
		// an invalid record fails the write, which then changes nothing.
		var merr error
		_, err = sw.WriteIfVersionFrom(ctx, catalog.FileName, func(w io.Writer) error {
			merr = catalog.MarshalTo(w, next)
			return merr
		}, version)
		if errors.Is(merr, catalog.ErrInvalid) {
			return fmt.Errorf("engine: refusing to write an invalid catalog: %w", merr)
		}
	default:
		_, err = root.WriteIfVersion(ctx, catalog.FileName, data, version)
	}
	if errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrCatalogRace, root)
	}
	if err != nil {
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
		if stg != nil && !stg.isUnstaged(it.Path) {
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

// staged is a stage of a publication's writes, with the info of each
// staged object.
type staged struct {
	storage.Stage
	mu   sync.Mutex
	info map[string]storage.ObjectInfo
	// unstaged are the paths the stage read and checked but did not keep
	// (storage.ErrNotStaged): written with Put when the others are named.
	unstaged map[string]bool
}

// stageAll stages every write. A bundle file whose bytes are not the
// manifest's fails its Put (bundle.Open verifies while streaming), before
// anything is visible.
func (e *Engine) stageAll(ctx context.Context, root storage.Backend, stg *staged, pub Publication, writes []planner.Item, content map[string][]byte, stored map[string]planner.Stored) error {
	return e.forEach(ctx, len(writes), func(ctx context.Context, i int) error {
		it := writes[i]
		r, done, err := source(ctx, pub, it, content[it.Path])
		if err != nil {
			return err
		}
		defer done()
		src := &sourceReader{r: r}
		s, exists := stored[it.Path]
		opts := putOptions(it, s, exists)
		opts.SourceVerified = content[it.Path] == nil // bundle.Open checks the digest itself
		oi, err := stg.Put(ctx, it.Path, src, it.Desired.Size, opts)
		if src.err != nil && !errors.Is(src.err, io.EOF) && errors.Is(err, src.err) {
			return src.err // the bundle's own error (a damaged file), as the verification pass reports it
		}
		notStaged := errors.Is(err, storage.ErrNotStaged)
		if err != nil && !notStaged {
			return writeError(root, it, err)
		}
		stg.mu.Lock()
		if notStaged {
			stg.unstaged[it.Path] = true // read and checked to its end: verified
		} else {
			stg.info[it.Path] = oi
		}
		stg.mu.Unlock()
		if _, generated := content[it.Path]; !generated {
			progress.Add(ctx, 1, it.Desired.Size) // the "checking bundle" stage: this copy is verified
		}
		return nil
	})
}

// sourceReader remembers the error its source gave.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// commit names one staged output; its info is the commit's when the
// stage reports it then (S3: the ETag), else its Put's.
func (stg *staged) commit(ctx context.Context, root storage.Backend, it planner.Item) (storage.ObjectInfo, error) {
	if ic, ok := stg.Stage.(storage.InfoCommitter); ok {
		oi, err := ic.CommitInfo(ctx, it.Path)
		if err != nil {
			return oi, writeError(root, it, err)
		}
		if oi.Fingerprint != "" {
			return oi, nil
		}
	} else if err := stg.Commit(ctx, it.Path); err != nil {
		return storage.ObjectInfo{}, writeError(root, it, err)
	}
	stg.mu.Lock()
	defer stg.mu.Unlock()
	return stg.info[it.Path], nil
}

func (stg *staged) isUnstaged(path string) bool {
	stg.mu.Lock()
	defer stg.mu.Unlock()
	return stg.unstaged[path]
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
