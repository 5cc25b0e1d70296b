package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// A publication reads of the root's catalog only what its plan needs
// (planner.Select): the records of its owner and those at, above and
// below its paths, plus every record's path and place (catalog.Layout).
// The next catalog is merged from the catalog's bytes and the plan's
// records (catalog.Merge), the runs of other records copied as bytes,
// unparsed. A catalog of a million records then costs the publication
// its paths, not its half a gigabyte of records parsed twice (the catalog
// read and the one written). A maintenance command (readSelected) asks
// no path of the records it does not read: it keeps where runs of them
// lie (catalog.NewSparseLayout), not each one's path.

// recordSelection is what a streamed read keeps of a catalog's records:
// those Record selects, about Desired of them (planner.Selection, or a
// maintenance command's rule: recordRule).
type recordSelection interface {
	Record(o *catalog.Output) bool
	Desired() int
}

// recordRule selects the records match selects, about hint of them.
type recordRule struct {
	match func(*catalog.Output) bool
	hint  int
}

func (r recordRule) Record(o *catalog.Output) bool { return r.match(o) }
func (r recordRule) Desired() int                  { return r.hint }

// parseSelected reads the catalog cr opened as a publication does, as a
// stream: the records sel selects, every record's path and place
// (catalog.Layout; sparse: runs of records, catalog.NewSparseLayout), and
// the version. A catalog in another form (written by hand) or no v4
// catalog at all is read again whole and parsed: what Parse refuses is
// refused with its message, and a v4 catalog is written in Marshal's form
// (in memory) to be read as a stream.
func parseSelected(ctx context.Context, root storage.Backend, cr catalogRead, sel recordSelection, sparse bool) (state, error) {
	if !cr.found {
		return state{}, nil
	}
	if cr.whole != nil {
		p := cr.whole()
		return p.st, p.err
	}
	var r io.Reader = cr.vr
	if cr.data != nil {
		r = bytes.NewReader(cr.data)
	}
	st, err := scanSelected(r, sel, cr.vr.Size, sparse)
	if err == nil {
		st.version, err = cr.vr.Version()
		st.reread = cr.vr.Reread
	}
	if errors.Is(err, catalog.ErrNotStreamed) {
		return parseWhole(ctx, root, sel, sparse)
	}
	if err != nil {
		return state{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	return st, nil
}

// readSelected reads root's catalog as a publication does (openCatalog,
// parseSelected): whole up to Engine.WholeCatalog bytes, else the records
// sel selects and where runs of the others lie (sparse). done ends the
// read, once the next catalog is committed: that is merged from it
// (nextDocument).
func (e *Engine) readSelected(ctx context.Context, root storage.Backend, sel recordSelection) (st state, done func(), err error) {
	cr := openCatalog(ctx, root, e.wholeCatalog())
	if cr.err != nil {
		cr.close()
		return state{}, func() {}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, cr.err)
	}
	if st, err = parseSelected(ctx, root, cr, sel, true); err != nil {
		cr.close()
		return state{}, func() {}, err
	}
	return st, cr.close, nil
}

// parseWhole is parseSelected of a catalog not in Marshal's form.
func parseWhole(ctx context.Context, root storage.Backend, sel recordSelection, sparse bool) (state, error) {
	data, v, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil || v == "" {
		return state{}, err
	}
	whole, legacy, err := catalog.Parse(data)
	if err != nil {
		return state{}, fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
	}
	if legacy {
		return state{legacy: true, version: v}, nil
	}
	canon, err := catalog.Marshal(whole)
	if err != nil {
		return state{}, fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
	}
	st, err := scanSelected(bytes.NewReader(canon), sel, int64(len(canon)), sparse)
	if err != nil {
		return state{}, fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
	}
	st.version = v
	st.reread = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(canon)), nil }
	return st, nil
}

// scanSelected is parseSelected of a catalog in Marshal's form of about
// size bytes (-1: unknown) read from r.
func scanSelected(r io.Reader, sel recordSelection, size int64, sparse bool) (state, error) {
	var paths *catalog.Layout
	if sparse {
		paths = catalog.NewSparseLayout()
	} else {
		paths = catalog.NewLayout(size)
	}
	head, outs, err := catalog.ScanLayout(r, size, paths, sel.Record)
	if err != nil {
		return state{}, err
	}
	cat := &catalog.Catalog{DistributorVersion: head.DistributorVersion, CreatedAt: head.CreatedAt, UpdatedAt: head.UpdatedAt, Outputs: outs}
	return state{cat: cat, paths: paths}, nil
}

// pathHashes is a set of paths by 64-bit hashes, 8 bytes a path: the
// objects a listing of a large root found that a plan does not read. A
// collision (a 2⁻⁶⁴ chance a pair) only spares a look for a link.
type pathHashes struct {
	seed   maphash.Seed
	sums   []uint64
	sorted bool
}

func newPathHashes() *pathHashes { return &pathHashes{seed: maphash.MakeSeed()} }

func (h *pathHashes) add(p string) {
	h.sums, h.sorted = append(h.sums, maphash.String(h.seed, p)), false
}

func (h *pathHashes) len() int { return len(h.sums) }

// has reports whether p was added; it is asked once the adding is done.
func (h *pathHashes) has(p string) bool {
	if !h.sorted {
		slices.Sort(h.sums)
		h.sorted = true
	}
	_, ok := slices.BinarySearch(h.sums, maphash.String(h.seed, p))
	return ok
}

// recorded is what the fingerprint index and the retired sweep ask of a
// catalog: how many records it holds, whether one is at a path, each
// record's path in path order, and the paths (sorted) the catalog read
// recorded and this one does not (exact: false when it does not know).
type recorded interface {
	count() int
	has(p string) bool
	walk(fn func(p string))
	removed() (paths []string, exact bool)
}

// wholeCatalog is a catalog held whole as recorded.
type wholeCatalog struct{ cat *catalog.Catalog }

func (w wholeCatalog) count() int { return len(w.cat.Outputs) }

func (w wholeCatalog) has(p string) bool {
	_, ok := w.cat.Lookup(p)
	return ok
}

func (w wholeCatalog) walk(fn func(p string)) {
	for i := range w.cat.Outputs {
		fn(w.cat.Outputs[i].Path)
	}
}

func (w wholeCatalog) removed() ([]string, bool) { return nil, false }

// nextCatalog is the catalog a publication commits, as recorded: the
// records its plan leaves (next, for the records read: st.cat) and the
// other records of the catalog read.
type nextCatalog struct {
	next *catalog.Catalog
	st   state
}

func (n nextCatalog) count() int {
	return n.st.paths.Len() - len(n.st.cat.Outputs) + len(n.next.Outputs)
}

func (n nextCatalog) has(p string) bool {
	if _, ok := n.next.Lookup(p); ok {
		return true
	}
	_, read := n.st.cat.Lookup(p)
	return !read && n.st.paths.Has(p)
}

// removed is the paths of the records the plan read that next leaves out:
// the catalog's other records stay.
func (n nextCatalog) removed() ([]string, bool) {
	find := n.next.Finder()
	var out []string
	for i := range n.st.cat.Outputs {
		if p := n.st.cat.Outputs[i].Path; !hasRecord(find, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out) // read in path order: sorted already, but for a catalog parsed whole
	return out, true
}

func hasRecord(find func(string) (catalog.Output, bool), p string) bool {
	_, ok := find(p)
	return ok
}

// walk merges the paths of the catalog read, but those the plan read
// (sorted, as read), with next's.
func (n nextCatalog) walk(fn func(p string)) {
	next := make([]string, len(n.next.Outputs))
	for i := range n.next.Outputs {
		next[i] = n.next.Outputs[i].Path
	}
	slices.Sort(next)
	read := n.st.cat.Outputs
	for i := range n.st.paths.Len() {
		p := n.st.paths.Path(i)
		for len(next) > 0 && next[0] < p {
			fn(next[0])
			next = next[1:]
		}
		for len(read) > 0 && read[0].Path < p {
			read = read[1:]
		}
		if len(read) > 0 && read[0].Path == p {
			continue // the plan's records say whether it stays: next
		}
		fn(p)
	}
	for _, p := range next {
		fn(p)
	}
}

// recordedAfter is the catalog next (a plan's Next, or the catalog read)
// as recorded; nil when there is none.
func (st state) recordedAfter(next *catalog.Catalog) recorded {
	switch {
	case next == nil:
		return nil
	case st.paths == nil:
		return wholeCatalog{next}
	}
	return nextCatalog{next: next, st: st}
}

// nextDocument is the catalog that follows st after a plan whose Next is
// next, as a backend writes it (PrepareCatalog): merged from the bytes
// read and next, or next whole where there was no catalog.
func (st state) nextDocument(ctx context.Context, next *catalog.Catalog) storage.Document {
	if st.paths == nil {
		return catalogDocument(next)
	}
	read := make([]string, len(st.cat.Outputs))
	for i := range st.cat.Outputs {
		read[i] = st.cat.Outputs[i].Path
	}
	return storage.Document{Path: catalog.FileName, Records: nextCatalog{next: next, st: st}.count(),
		Encode: func(w io.Writer) error {
			old, err := st.reread(ctx)
			if err != nil {
				return fmt.Errorf("read %s again: %w", catalog.FileName, err)
			}
			defer old.Close()
			return catalog.Merge(w, old, st.paths, next, read)
		}}
}

// heldPaths tells Find what the catalog read says the root holds: of a
// sparse layout, the first path of the run of each record (where a
// listing may be split).
func (st state) heldPaths() (int, func(int) string) {
	switch {
	case st.paths != nil:
		return st.paths.Len(), st.paths.Near
	case st.cat != nil:
		return outputPaths(st.cat)()
	}
	return 0, func(int) string { return "" }
}
