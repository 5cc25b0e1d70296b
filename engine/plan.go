package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// state is what a root holds before planning.
type state struct {
	cat     *catalog.Catalog // nil when absent or legacy
	legacy  bool
	version storage.Version

	// paths, when set (a streamed read: parseSelected), is every
	// record's path and place in the catalog's bytes (a maintenance
	// command's: where runs of records lie), cat holding only the
	// records the plan reads, and
	// reread reads the catalog's bytes again in Marshal's form (the next
	// catalog is merged from them), until the catalog read is closed.
	paths  *catalog.Layout
	reread func(context.Context) (io.ReadCloser, error)
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
// their path). The map is sized for hint objects and holds those keep
// (nil: all) keeps; others, when set, records the others found, and the
// links are all found.
func findStored(ctx context.Context, root storage.Backend, paths []string, held storage.Held, hint int, keep func(string) bool, others *pathHashes) (map[string]planner.Stored, []string, error) {
	stored := make(map[string]planner.Stored, hint)
	var links []string
	err := root.Find(ctx, storage.Query{Paths: paths, Held: held}, func(o storage.ObjectInfo) error {
		if !catalog.IsReserved(o.Path) {
			if keep == nil || keep(o.Path) {
				stored[o.Path] = planner.Stored{Size: o.Size, Fingerprint: o.Fingerprint}
			} else if others != nil {
				others.add(o.Path)
			}
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

	// others are the objects found that stored leaves out.
	others *pathHashes
}

// reached reports whether Find reported an object at p.
func (f found) reached(p string) bool {
	if _, ok := f.stored[p]; ok {
		return true
	}
	return f.others != nil && f.others.has(p)
}

// catalogRead is the catalog opened for a read of its bytes and version
// (storage.Backend.Open, Versioned); found is false when there is none.
type catalogRead struct {
	vr    storage.Reader
	found bool
	err   error

	// data is the whole catalog, read at once where it is small (as
	// catalog.Scan would read it): the read then overlaps what runs
	// beside the opening.
	data []byte

	// whole, when set, waits for that catalog parsed whole, which runs
	// beside the listing (Engine.WholeCatalog).
	whole func() parsedState
}

// openCatalog opens root's catalog for a read (catalogRead), and parses
// one of at most wholeMax bytes (negative: none) whole.
func openCatalog(ctx context.Context, root storage.Backend, wholeMax int64) catalogRead {
	vr, err := root.Open(ctx, catalog.FileName, storage.Versioned)
	if errors.Is(err, storage.ErrNotExist) {
		return catalogRead{}
	}
	cr := catalogRead{vr: vr, found: err == nil, err: err}
	if cr.found && vr.Size >= 0 && vr.Size <= catalog.HoldMax {
		cr.data = make([]byte, 0, vr.Size+1) // +1: the read that meets the end
		for cr.err == nil {
			if len(cr.data) == cap(cr.data) {
				cr.data = append(cr.data, 0)[:len(cr.data)]
			}
			var n int
			n, cr.err = vr.Read(cr.data[len(cr.data):cap(cr.data)])
			cr.data = cr.data[:len(cr.data)+n]
		}
		if cr.err == io.EOF {
			cr.err = nil
		}
	}
	if cr.err == nil && cr.data != nil && int64(len(cr.data)) <= wholeMax {
		parsed := make(chan parsedState, 1)
		go func() {
			var p parsedState
			if v, err := vr.Version(); err != nil {
				p.err = fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
			} else {
				p.st, p.err = parseState(root, cr.data, v)
			}
			parsed <- p
		}()
		cr.whole = sync.OnceValue(func() parsedState { return <-parsed })
	}
	return cr
}

// close closes the catalog opened, if any (again: nothing).
func (cr catalogRead) close() {
	if cr.whole != nil {
		cr.whole() // nothing outlives the read
	}
	if cr.found {
		cr.vr.Close()
	}
}

// readAndFind reads what sel selects of the catalog (parseSelected) and
// finds what is stored at the paths of outs while the catalog is read
// and then whileFinding runs on the state read (two cores). read, when
// set, gives the catalog already read (or being read). A catalog parsed
// whole needs no selection: sel is asked for only by a streamed one.
func readAndFind(ctx context.Context, root storage.Backend, outs []Output, sel func() *planner.Selection, whileFinding func(state) error, read func() catalogRead) (state, found, error) {
	cr := read()
	if cr.err != nil {
		return state{}, found{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, cr.err)
	}
	var selection *planner.Selection
	if cr.whole == nil {
		selection = sel()
	}
	parsedDone := make(chan struct{})
	var parsed parsedState
	go func() {
		defer close(parsedDone)
		parsed.st, parsed.err = parseSelected(ctx, root, cr, selection, false)
	}()
	wait := func() parsedState {
		<-parsedDone
		return parsed
	}
	var held storage.Held
	size := cr.vr.Size
	if size < 0 {
		size = 1 << 40 // unknown: no bound
	}
	if !cr.found {
		size = 0
	}
	if cr.found {
		held = storage.Held{AtMost: catalog.MaxRecords(int(size)), Paths: func() (int, func(int) string) {
			return wait().st.heldPaths()
		}}
	}

	// The plan reads what is stored at what it selects; of the other
	// objects found only their paths' hashes are kept (a delete found
	// needs no look for a link on its way). A legacy root, whose
	// replacement clears every object, is found again whole.
	var keep func(string) bool
	var others *pathHashes
	if selection != nil { // planned whole: every object is kept
		keep, others = selection.Path, newPathHashes()
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
	hint := min(int(size)/512, 2*len(paths))
	go func() {
		stored, links, err := findStored(fctx, root, paths, held, hint, keep, others)
		done <- found{stored: stored, links: links, err: err, others: others}
	}()
	p := wait()
	err := p.err
	if err == nil {
		err = whileFinding(p.st)
	}
	if err != nil {
		cancel()
		<-done // nothing outlives the call
		return state{}, found{}, err
	}
	f := <-done
	if f.err == nil && p.st.legacy && others != nil && others.len() > 0 {
		f = found{}
		f.stored, f.links, f.err = findStored(ctx, root, paths, held, hint, nil, nil)
	}
	return p.st, f, f.err
}

// Plan computes the publication's plan without changing anything. Its
// Next holds the records the plan read (planner.Select), as the plan
// leaves them; the catalog's other records stay as they are.
func (e *Engine) Plan(ctx context.Context, root storage.Backend, pub Publication) (planner.Plan, error) {
	cr := openCatalog(ctx, root, e.wholeCatalog())
	defer cr.close()
	pl, err := e.plan(ctx, root, pub, func() catalogRead { return cr })
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

	// retired is the root's retired record as the plan read it.
	retired retiredRead
}

// plan plans pub. read gives the catalog opened (or being opened); the
// caller closes it once done with the plan (its Next is merged from it).
func (e *Engine) plan(ctx context.Context, root storage.Backend, pub Publication, read func() catalogRead) (planned, error) {
	var pl planned
	var err error

	// The index layout follows the catalog read. A publication of many
	// outputs reads every shard anyway (it keeps outputs in all of them):
	// it reads them while the root is listed. So does any publication to
	// an index of one shard: it reads that shard to check the outputs it
	// keeps or to update those it writes, after the listing otherwise.
	// The index is held as the catalog is: whole where the catalog is
	// (a small root), else only the publication's entries (a streamed
	// catalog's root can hold millions).
	preload := func(st state) error {
		n, _ := st.heldPaths()
		pl.fps = newFingerprints(FingerprintShards(n))
		if st.paths != nil {
			pl.fps.want = make(map[string]bool, len(pub.Outputs))
			for _, o := range pub.Outputs {
				pl.fps.want[o.Path] = true
			}
		}
		if pl.fps.shards > 1 && (st.cat == nil || len(pub.Outputs) < 4*pl.fps.shards) {
			return nil
		}
		if err := e.loadShards(ctx, root, pl.fps, allShards(pl.fps.shards), false); err != nil {
			return fmt.Errorf("check stored outputs in %s: %w", root, err)
		}
		return nil
	}
	var f found
	retired := readRetiredBeside(ctx, root, pub)
	desired := make([]planner.Desired, len(pub.Outputs))
	for i, o := range pub.Outputs {
		desired[i] = o.Desired
	}
	sel := func() *planner.Selection { return planner.Select(pub.Owner, desired) }
	pl.st, f, err = readAndFind(ctx, root, pub.Outputs, sel, preload, read)
	if pl.retired, err = retired(err); err != nil {
		return pl, err
	}
	pl.stored = f.stored
	markRetired(pl.stored, pl.retired)
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
	if err == nil && len(pl.Plan.Collisions) > 0 && pub.RetainPrevious == 0 {
		err = pl.replanRetired(ctx, root, in)
	}
	if err != nil {
		return pl, fmt.Errorf("%s: %w", root, err)
	}
	return pl, refuseSymlinks(ctx, root, pl.Plan, f.reached, f.links)
}
