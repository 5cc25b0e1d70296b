package planner

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/distributor/distributor/catalog"
)

// Workflow is a destination's runtime policy.
type Workflow string

const (
	// Replacement makes the owner's managed set equal the publication.
	Replacement Workflow = "replacement"

	// Additive writes the planned outputs and keeps everything else.
	Additive Workflow = "additive"
)

// ParseWorkflow validates a configured workflow; "" means the default, additive.
func ParseWorkflow(s string) (Workflow, error) {
	switch Workflow(s) {
	case "":
		return Additive, nil
	case Replacement, Additive:
		return Workflow(s), nil
	}
	return "", fmt.Errorf("unknown workflow %q: use %q or %q", s, Replacement, Additive)
}

var (
	// ErrEmptyReplacement refuses a replacement that desires nothing and would
	// delete every record of its owner (almost always a broken producer).
	ErrEmptyReplacement = errors.New("refused: replacement publication desires no outputs and would delete every output of its owner")

	// ErrTooManyDeletes aborts a plan whose delete set exceeds max_deletes.
	ErrTooManyDeletes = errors.New("refused: delete set exceeds max_deletes")

	// ErrDuplicateOutput: two desired outputs map to one path.
	ErrDuplicateOutput = errors.New("two outputs map to the same path")

	// ErrPathConflict: one desired output would be a folder of another.
	ErrPathConflict = errors.New("an output path is a folder of another output")
)

// Desired is one output the publication wants at a path.
type Desired struct {
	Path string

	// From is the bundle path whose bytes are copied (kind source) or
	// transformed (kind generated).
	From      string
	Kind      string // catalog.KindSource or catalog.KindGenerated
	Transform string // generated only
	SHA256    string
	Size      int64
	URL       string
}

// Stored is what storage says about an object in the root.
type Stored struct {
	Size int64

	// Fingerprint names the stored version (storage.ObjectInfo.Fingerprint);
	// the planner passes it through, the engine writes against it.
	Fingerprint string

	// Damaged: the stored bytes are known to differ from the catalog's
	// record (a stale writer or a hand edit landed on them); they are
	// rewritten even when size and digest look unchanged.
	Damaged bool

	// Retired: the object is a path an earlier replacement dropped and the
	// engine keeps for a while (retain_previous). It is no content of
	// anyone else's: a write takes it over without a collision.
	Retired bool
}

// Input is everything a publication plan depends on.
type Input struct {
	Owner    catalog.Owner
	Source   catalog.Source
	Workflow Workflow
	Desired  []Desired

	// Catalog is the root's valid v4 catalog, or nil when there is none.
	Catalog *catalog.Catalog

	// Legacy is true when the root holds superseded (<v4) state.
	Legacy bool

	// Stored lists the objects in the root (reserved paths excluded). It
	// must cover at least every desired path, the paths of its folders and
	// everything below it; for a legacy replacement it must list the whole
	// root.
	Stored map[string]Stored
	Now    time.Time

	// MaxDeletes > 0 aborts a plan that deletes more objects.
	MaxDeletes int

	// TakeOwnership adopts colliding unmanaged paths instead of blocking.
	TakeOwnership bool

	// AllowOlder plans the publication even when the owner already has a
	// newer version (an operator's roll back): nothing is superseded and
	// no path is kept for a newer version. An additive roll back keeps
	// the owner's other records unless DeleteLater (a replacement deletes
	// every record of the owner it does not rewrite anyway).
	AllowOlder bool

	// DeleteLater, with AllowOlder on an additive root, also deletes the
	// owner's records of newer versions of the publication's source that
	// it does not rewrite: the roll back undoes those versions' other
	// paths too (and frees paths a record from the future pins). Without
	// AllowOlder, or on a replacement root, it changes nothing.
	DeleteLater bool

	// DistributorVersion is written into the next catalog.
	DistributorVersion string
}

// Action is what happens at one path.
type Action string

const (
	Create    Action = "create"
	Update    Action = "update"
	Unchanged Action = "unchanged"
	Delete    Action = "delete"
	Collision Action = "collision"

	// KeptNewer: an additive publication older than a version the owner
	// already holds (of any of its sources) leaves this path as that newer
	// version wrote it (newest wins per path); nothing is written and the
	// record stays as it is.
	KeptNewer Action = "kept_newer"
)

// Item is the plan for one path.
type Item struct {
	Path   string
	Action Action

	// Write is true when the bytes must be (re)written.
	Write bool

	// Desired is set for create, update, unchanged, kept_newer and
	// collision.
	Desired *Desired

	// Record is the record after the plan (create/update/unchanged), the
	// record being removed (delete), or the record left as it is
	// (kept_newer: the newer version's; none when only outputs in the way
	// of the path are newer).
	Record catalog.Output

	// Adopted marks a create that takes over unmanaged content (--take-ownership).
	Adopted bool

	// Displaced marks a delete of a managed output (or, on a legacy first
	// run, of a leftover) that is in the way of a planned path: a file
	// where a planned output needs a folder, or files below a planned
	// output's path. It must run before the writes.
	Displaced bool

	// InTheWay lists, for a collision, the unmanaged objects in the way of
	// the path (empty when the path itself is taken).
	InTheWay []string
}

// Plan is the outcome of Build.
type Plan struct {
	Owner    catalog.Owner
	Source   catalog.Source // the publication's
	Workflow Workflow
	Items    []Item // sorted by path

	// Collisions are desired paths that exist in storage but not in the
	// catalog. Any collision blocks the whole publication to the root.
	Collisions []string

	// Clear lists unmanaged paths a legacy replacement first run removes.
	Clear []string

	// Next is the catalog after the plan fully succeeds; nil when blocked.
	Next *catalog.Catalog

	// Changed is false when executing the plan would change nothing at all.
	Changed bool

	// Superseded is set when a replacement's owner already holds a newer
	// version of the same source (see Newer): the plan has no items,
	// writes and deletes nothing, and Next is nil. It names the version
	// that won. An additive plan is never superseded: it keeps the newer
	// version's paths instead (KeptNewer).
	Superseded *catalog.Source
}

// Blocked reports whether collisions stop the publication.
func (p *Plan) Blocked() bool { return len(p.Collisions) > 0 }

// Count returns how many items have action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, it := range p.Items {
		if it.Action == a {
			n++
		}
	}
	return n
}

// Writes returns the items whose bytes must be written; none when the plan
// is blocked, so that no caller can half-execute a refused publication.
func (p *Plan) Writes() []Item {
	if p.Blocked() {
		return nil
	}
	var out []Item
	for _, it := range p.Items {
		if it.Write {
			out = append(out, it)
		}
	}
	return out
}

// Deletes returns the managed paths to delete (records and bytes), plus the
// legacy clear set, in path order; none when the plan is blocked. It
// includes the displaced ones.
func (p *Plan) Deletes() []string {
	if p.Blocked() {
		return nil
	}
	var out []string
	for _, it := range p.Items {
		if it.Action == Delete {
			out = append(out, it.Path)
		}
	}
	out = append(out, p.Clear...)
	sort.Strings(out)
	return out
}

// Displaced returns the paths of the displaced deletes, in path order: they
// make room for the writes and must run before them. None when the plan is
// blocked.
func (p *Plan) Displaced() []string {
	if p.Blocked() {
		return nil
	}
	var out []string
	for _, it := range p.Items {
		if it.Displaced {
			out = append(out, it.Path)
		}
	}
	return out
}

// Build plans one publication on one root.
//
// The desired paths and the catalog's records are walked side by side in
// path order (a manifest lists its paths sorted and a parsed catalog holds
// its records sorted; other inputs are sorted first): a republish of every
// output costs a few passes and two allocations of its size, with no index
// of either list and no sort of the plan.
func Build(in Input) (Plan, error) {
	p := Plan{Owner: in.Owner, Source: in.Source, Workflow: in.Workflow}
	if len(in.Desired) > 0 {
		p.Items = []Item{} // a refused plan has empty, not nil, items
	}
	if err := checkInput(in); err != nil {
		return p, err
	}
	cur := in.Catalog
	if cur == nil {
		cur = &catalog.Catalog{}
	}
	outs := recordsInOrder(cur)
	ds, err := sortDesired(in) // refused after the newest-wins check

	// Newest wins: an older version arriving late (redelivery, parallel
	// workers, a slow producer) must not roll the owner's outputs back.
	// A replacement loses to a newer version of its source; an additive
	// publication keeps the paths a newer version of any of the owner's
	// sources holds. A publication that names many of the records (a
	// republish) has their places found in the same pass.
	won, own, at := ownRecords(in, outs, ds, ds != nil && len(ds)*16 >= len(outs))
	older := !in.AllowOlder && own.newer
	if in.Workflow == Replacement {
		older = !in.AllowOlder && own.found && Newer(won, in.Source)
	}
	if older && in.Workflow == Replacement {
		// The bundle is the owner's whole set: an older one loses whole.
		p.Items = nil
		p.Superseded = &won
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if a, b, ok := nested(ds); ok {
		return p, fmt.Errorf("%w: %q and %q (a path cannot be a file and a folder)", ErrPathConflict, a, b)
	}
	if at == nil {
		at = places(ds, outs)
	}

	// An object where a planned output needs a folder, or objects below a
	// planned output's path, are in the way: a folder tree cannot hold both
	// (and on S3 the roots would stop mirroring each other).
	way := treeConflicts(ds, at, in.Stored, outs)

	// Additive publications are patches: an older one still writes its
	// paths, but not over (or in the way of) a newer version's.
	var kept []bool
	if older {
		kept = keptNewer(in, ds, at, outs, way)
	}
	blocked, displaced := sortOutTheWay(in, way, outs)
	dels, err := planReplacement(&p, in, ds, at, outs, own, displaced)
	if err != nil {
		return p, err
	}
	w := walk{in: in, outs: outs, current: own.current, dels: dels, disp: sortedKeys(displaced), displaced: displaced, blocked: blocked}
	w.items = p.Items
	w.run(ds, at, kept, len(dels)+len(displaced))
	p.Items, p.Collisions = w.items, w.collisions

	if n := w.deletes + len(p.Clear); in.MaxDeletes > 0 && n > in.MaxDeletes {
		return p, fmt.Errorf("%w: %d deletes, max_deletes is %d; nothing was deleted", ErrTooManyDeletes, n, in.MaxDeletes)
	}
	if p.Blocked() {
		return p, nil
	}
	p.Changed = w.changed || in.Catalog == nil
	p.Next = next(in, cur, outs, p.Items, w.recOf, w.creates, p.Changed)
	return p, nil
}

// checkInput refuses an input Build cannot plan.
func checkInput(in Input) error {
	if in.Workflow != Replacement && in.Workflow != Additive {
		return fmt.Errorf("unknown workflow %q", in.Workflow)
	}
	if in.Catalog != nil && in.Legacy {
		return errors.New("planner: input has both a catalog and legacy state")
	}
	if in.Owner.PipelineID == "" || in.Owner.DestinationID == "" {
		return fmt.Errorf("planner: owner %q needs both a pipeline id and a destination id", in.Owner)
	}
	if in.Now.IsZero() {
		return errors.New("planner: Now is required")
	}
	return nil
}

// sortDesired returns the desired outputs in path order, refusing bad
// paths, duplicates and records the next catalog could not hold (rather
// than failing after the writes).
func sortDesired(in Input) ([]*Desired, error) {
	ds := make([]*Desired, len(in.Desired))
	ascending := true
	for i := range in.Desired {
		d := &in.Desired[i]
		if !validDesired(in, d, i == 0) {
			return nil, firstRefusal(in)
		}
		ds[i] = d
		ascending = ascending && (i == 0 || ds[i-1].Path < d.Path)
	}
	if ascending { // a manifest's order: sorted, and so no duplicates
		return ds, nil
	}

	// Sorted by the paths beside the pointers: a comparison reads the two
	// paths' bytes only, not the outputs first.
	byPath := make([]pathOf, len(ds))
	for i, d := range ds {
		byPath[i] = pathOf{d.Path, d}
	}
	slices.SortFunc(byPath, func(a, b pathOf) int { return strings.Compare(a.path, b.path) })
	for i := range byPath {
		if i > 0 && byPath[i-1].path == byPath[i].path {
			return nil, firstRefusal(in)
		}
		ds[i] = byPath[i].d
	}
	return ds, nil
}

type pathOf struct {
	path string
	d    *Desired
}

// validDesired reports whether d's path and record are valid. The fields
// every record of the publication shares (owner, source, times) are checked
// with the first record; the others check only their own fields, and fall
// back to the whole check (which has the message) when one looks wrong.
func validDesired(in Input, d *Desired, first bool) bool {
	if !plainPath(d.Path) && catalog.ValidateOutputPath(d.Path) != nil {
		return false
	}
	if !first && catalog.ValidDigest(d.SHA256) && d.Size >= 0 && utf8.ValidString(d.URL) &&
		(d.Kind == catalog.KindSource || d.Kind == catalog.KindGenerated && d.From != "" && d.Transform != "" &&
			utf8.ValidString(d.Transform) && (plainPath(d.From) || catalog.ValidatePath(d.From) == nil)) {
		return true
	}
	return record(in, d).ValidateFields() == nil // the path is checked above
}

// plainPath reports, in one pass, whether p is a path of printable ASCII
// but '\' with no empty segment and no segment starting with '.' (which
// covers ".", "..", the reserved names and temp names), at most
// catalog.MaxPathLen bytes: a path catalog.ValidateOutputPath accepts
// (TestPlainPathsAreValid). Other paths get the whole check, which
// costs several passes and has the messages.
func plainPath(p string) bool {
	if p == "" || len(p) > catalog.MaxPathLen {
		return false
	}
	start := true // at the start of a segment
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			if start {
				return false // an empty segment, or an absolute path
			}
			start = true
			continue
		case c < 0x20 || c >= 0x7f || c == '\\' || start && c == '.':
			return false
		}
		start = false
	}
	return !start
}

// firstRefusal is the refusal of the first desired output in input order
// that has a bad path, repeats an earlier path or makes a bad record.
func firstRefusal(in Input) error {
	desired := make(map[string]*Desired, len(in.Desired))
	for i := range in.Desired {
		d := &in.Desired[i]
		if err := catalog.ValidateOutputPath(d.Path); err != nil {
			return err
		}
		if prev, dup := desired[d.Path]; dup {
			return fmt.Errorf("%w: %q from %q and %q", ErrDuplicateOutput, d.Path, prev.From, d.From)
		}
		if err := record(in, d).ValidateFields(); err != nil {
			return fmt.Errorf("planner: desired output %w", err)
		}
		desired[d.Path] = d
	}
	return errors.New("planner: desired outputs refused for no reason found") // unreachable
}

// recordsInOrder is cur's records in path order: the records themselves
// when they are (any parsed catalog), else a sorted copy.
func recordsInOrder(cur *catalog.Catalog) []catalog.Output {
	if cur.InOrder() {
		return cur.Outputs
	}
	outs := slices.Clone(cur.Outputs)
	slices.SortFunc(outs, func(a, b catalog.Output) int { return strings.Compare(a.Path, b.Path) })
	return outs
}

// sortOutTheWay splits what is in the way of planned paths into the paths
// it blocks (with the unmanaged content blocking them) and the managed
// outputs it displaces.
//
// Managed outputs in the way are displaced (deleted before the writes,
// like any overwrite of a managed output); so are retired paths (kept
// for readers of an earlier version, Stored.Retired) and legacy content,
// which a legacy first run rewrites or clears anyway. Unmanaged content in
// the way blocks the path, --take-ownership or not: adoption takes
// over a path, it does not turn a file into a folder.
func sortOutTheWay(in Input, way map[string][]string, outs []catalog.Output) (map[string][]string, map[string]Item) {
	blocked := map[string][]string{}
	displaced := map[string]Item{}
	for path, objects := range way {
		var unmanaged []string
		for _, o := range objects {
			if findRecord(outs, o) == nil && !in.Legacy && !in.Stored[o].Retired {
				unmanaged = append(unmanaged, o)
			}
		}
		if len(unmanaged) > 0 {
			blocked[path] = unmanaged
			continue
		}
		for _, o := range objects {
			it := Item{Path: o, Action: Delete, Displaced: true}
			if rec := findRecord(outs, o); rec != nil {
				it.Record = *rec
			}
			displaced[o] = it
		}
	}
	return blocked, displaced
}

// owned is what one pass over the records found of the publication's
// owner, so that no later pass compares owners or sources again (the
// catalog's strings are spread over megabytes: each comparison is a cache
// miss).
type owned struct {
	newest catalog.Source // of the publication's source, when found
	found  bool
	n      int // records of the owner

	// newer: a record of the owner, of any source, is newer than the
	// publication.
	newer bool

	// all are the owner's records; current those of them that hold the
	// publication's source version.
	all, current recordSet
}

// ownRecords returns the newest version of the publication's source among
// its owner's records (own.found: there is one) and the owner's records. With
// merge it also finds the places of the desired paths (sorted) in the same
// pass: the catalog's strings are spread over megabytes, and a second pass
// over them costs a cache miss a record. A few paths (an additive
// publication to a large root) are better left to places, which searches.
func ownRecords(in Input, outs []catalog.Output, ds []*Desired, merge bool) (catalog.Source, owned, []place) {
	own := owned{all: newRecordSet(len(outs)), current: newRecordSet(len(outs))}
	var at []place
	if merge {
		at = make([]place, len(ds))
	}
	j := 0
	for i := range outs {
		o := &outs[i]
		for ; at != nil && j < len(ds); j++ {
			c := strings.Compare(ds[j].Path, o.Path)
			if c > 0 {
				break
			}
			at[j] = place{at: int32(i), hit: c == 0}
		}
		if o.PipelineID != in.Owner.PipelineID || o.DestinationID != in.Owner.DestinationID {
			continue
		}
		own.n++
		own.all.add(i)
		own.newer = own.newer || Newer(o.Source, in.Source)
		if o.Source.ID != in.Source.ID {
			continue
		}
		if o.Source.Digest == in.Source.Digest && o.Source.Created.Equal(in.Source.Created) {
			own.current.add(i)
		}
		if !own.found || Newer(o.Source, own.newest) {
			own.newest, own.found = o.Source, true
		}
	}
	for ; at != nil && j < len(ds); j++ {
		at[j] = place{at: int32(len(outs))}
	}
	return own.newest, own, at
}

// recordSet is a set of record indexes.
type recordSet []uint64

func newRecordSet(n int) recordSet { return make(recordSet, (n+63)/64) }
func (s recordSet) add(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s recordSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }

// place is where a desired path falls among the records: the index of the
// first record not before it, and whether that record is at the path.
type place struct {
	at  int32
	hit bool
}

// places finds the place of each desired path (sorted) among the records
// (sorted): one pass that steps a few records and searches past a gap.
func places(ds []*Desired, outs []catalog.Output) []place {
	at := make([]place, len(ds))
	c := cursor{outs: outs}
	for i, d := range ds {
		k, hit := c.seek(d.Path)
		at[i] = place{at: int32(k), hit: hit}
	}
	return at
}

// planReplacement finds the deletes of a replacement: the owner's records
// it no longer desires (their indexes in outs, in path order) and, on a
// legacy root, the stored content to clear (p.Clear); and those of an
// additive roll back asked to delete later versions (AllowOlder and
// DeleteLater): the owner's records of newer versions of the source that
// it does not desire.
func planReplacement(p *Plan, in Input, ds []*Desired, at []place, outs []catalog.Output, own owned, displaced map[string]Item) ([]int, error) {
	if in.Workflow != Replacement {
		if !in.AllowOlder || !in.DeleteLater {
			return nil, nil
		}

		// The roll back undoes the newer versions of its source: the
		// owner's records they wrote that the bundle does not rewrite go,
		// so that no newer record (a wrong clock's, say) is left to keep
		// later versions off its path.
		return undesired(own.all, at, outs, displaced, func(o *catalog.Output) bool {
			return o.Source.ID == in.Source.ID && Newer(o.Source, in.Source)
		}), nil
	}
	dels := undesired(own.all, at, outs, displaced, func(*catalog.Output) bool { return true })
	if in.Legacy {
		for _, path := range sortedKeys(in.Stored) {
			if !desiredAt(ds, path) && !catalog.IsReserved(path) && !displacedAt(displaced, path) {
				p.Clear = append(p.Clear, path)
			}
		}
	}

	// An empty legacy replacement would clear the whole root: as broken.
	if len(ds) == 0 && (own.n > 0 || len(p.Clear) > 0) {
		for _, i := range dels {
			p.Items = append(p.Items, Item{Path: outs[i].Path, Action: Delete, Record: outs[i]})
		}
		return nil, ErrEmptyReplacement
	}
	return dels, nil
}

// undesired returns the records of set (indexes in outs, in path order)
// that match and are neither desired (at: the desired paths' places) nor
// displaced.
func undesired(set recordSet, at []place, outs []catalog.Output, displaced map[string]Item, match func(*catalog.Output) bool) []int {
	var dels []int
	j := 0
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			for j < len(at) && (int(at[j].at) < i || int(at[j].at) == i && !at[j].hit) {
				j++
			}
			if j < len(at) && int(at[j].at) == i || displacedAt(displaced, outs[i].Path) || !match(&outs[i]) {
				continue // desired, displaced, or not asked for
			}
			dels = append(dels, i)
		}
	}
	return dels
}

// walk builds the items in path order: the planned paths (ds), with the
// replacement's deletes and the displaced outputs merged in.
type walk struct {
	in        Input
	outs      []catalog.Output
	current   recordSet // the owner's records of this source version
	dels      []int     // indexes in outs
	disp      []string  // displaced paths, sorted
	displaced map[string]Item
	blocked   map[string][]string

	items []Item

	// recOf is, per item, the index of the record it plans, or for one at
	// a path without a record -1 - the index of the first record after it.
	recOf            []int32
	collisions       []string
	deletes, creates int
	changed          bool // an item is not Unchanged
}

// run walks the desired paths ds (at their places at) and the records
// side by side in path order, keeping the paths kept marks for a newer
// version; others is how many items the records add at most.
func (w *walk) run(ds []*Desired, at []place, kept []bool, others int) {
	if n := len(ds) + others; n > 0 {
		w.items = make([]Item, 0, n)
		w.recOf = make([]int32, 0, n)
	}
	for i, d := range ds {
		w.before(d.Path, false)
		if kept != nil && kept[i] {
			w.keep(d, at[i])
			continue
		}
		w.plan(d, at[i])
	}
	w.before("", true)
}

// before appends the deletes and displaced outputs whose paths sort before
// path, or all that are left when last.
func (w *walk) before(path string, last bool) {
	for len(w.dels)+len(w.disp) > 0 {
		del := len(w.dels) > 0 && (len(w.disp) == 0 || w.outs[w.dels[0]].Path < w.disp[0])
		if del {
			old := &w.outs[w.dels[0]]
			if !last && old.Path >= path {
				return
			}
			w.items = append(w.items, Item{Path: old.Path, Action: Delete, Record: *old})
			w.recOf = append(w.recOf, int32(w.dels[0]))
			w.dels = w.dels[1:]
		} else {
			if !last && w.disp[0] >= path {
				return
			}
			w.items = append(w.items, w.displaced[w.disp[0]])
			w.recOf = append(w.recOf, int32(recordIndex(w.outs, w.disp[0])))
			w.disp = w.disp[1:]
		}
		w.deletes++
		w.changed = true
	}
}

// plan appends the item of one desired output, at its place among the
// records.
func (w *walk) plan(d *Desired, at place) {
	var inTheWay []string
	if len(w.blocked) > 0 {
		inTheWay = w.blocked[d.Path]
	}
	w.items = w.items[:len(w.items)+1] // sized for every item, zeroed
	it := &w.items[len(w.items)-1]
	if at.hit {
		r := int(at.at)
		planPath(it, w.in, d, inTheWay, &w.outs[r], w.current.has(r))
		w.recOf = append(w.recOf, at.at)
	} else {
		planPath(it, w.in, d, inTheWay, nil, false)
		w.recOf = append(w.recOf, -1-at.at)
	}
	switch it.Action {
	case Collision:
		w.collisions = append(w.collisions, d.Path)
	case Create:
		w.creates++
	}
	if it.Action != Unchanged {
		w.changed = true
	}
}

// keep appends the KeptNewer item of a desired output whose path (or an
// output in its way) a newer version of the source wrote: its record, if
// any, stays as it is.
func (w *walk) keep(d *Desired, at place) {
	it := Item{Path: d.Path, Action: KeptNewer, Desired: d}
	if at.hit {
		it.Record = w.outs[at.at]
		w.recOf = append(w.recOf, at.at)
	} else {
		w.recOf = append(w.recOf, -1-at.at)
	}
	w.items = append(w.items, it)
}

// keptNewer marks, per desired output (ds, sorted; at their places among
// the records), whether an older additive publication leaves its path
// alone: the path's record, or a managed output in its way, holds a
// version newer than the publication's written by the same owner, from
// any of its sources (Newer orders every source version, so the end state
// does not depend on arrival order). A kept path leaves way: it is not
// written, so nothing is in its way.
func keptNewer(in Input, ds []*Desired, at []place, outs []catalog.Output, way map[string][]string) []bool {
	newer := func(o *catalog.Output) bool {
		return o != nil && o.PipelineID == in.Owner.PipelineID &&
			o.DestinationID == in.Owner.DestinationID && Newer(o.Source, in.Source)
	}
	kept := make([]bool, len(ds))
	for i, d := range ds {
		kept[i] = at[i].hit && newer(&outs[at[i].at]) ||
			slices.ContainsFunc(way[d.Path], func(o string) bool { return newer(findRecord(outs, o)) })
		if kept[i] {
			delete(way, d.Path)
		}
	}
	return kept
}

// planPath decides what happens to one desired output: old is its record,
// if any (current: the owner's, of this source version); inTheWay the
// unmanaged content blocking its path, if any.
func planPath(it *Item, in Input, d *Desired, inTheWay []string, old *catalog.Output, current bool) {
	// it is zero: only the fields that differ are written (a republish
	// fills 10,000 items of 320 bytes).
	it.Path, it.Desired = d.Path, d
	stored, exists := in.Stored[d.Path]
	switch {
	case inTheWay != nil:
		it.Action, it.InTheWay = Collision, inTheWay
	case old != nil:
		write := old.SHA256 != d.SHA256 || !exists || stored.Size != d.Size || stored.Damaged
		if !write && current && sameOutput(d, old) {
			it.Action, it.Record = Unchanged, *old
			return
		}
		it.Action, it.Write, it.Record = Update, write, record(in, d)
		it.Record.CreatedAt = old.CreatedAt
	case exists && !in.Legacy && !in.TakeOwnership && !stored.Retired:
		it.Action = Collision
	default:
		it.Action, it.Write, it.Record, it.Adopted = Create, true, record(in, d), exists && !in.Legacy && !stored.Retired
	}
}

// sameOutput is record(in, d).SameContent(*old) for old at d's path,
// with the same owner and source version and digest as the record.
func sameOutput(d *Desired, old *catalog.Output) bool {
	sourcePath, transform := "", ""
	if d.Kind == catalog.KindGenerated {
		sourcePath, transform = d.From, d.Transform
	}
	return old.Kind == d.Kind && old.SourcePath == sourcePath && old.Transform == transform &&
		old.Size == d.Size && old.URL == d.URL
}

// Newer reports whether source version a beats b: a later created time;
// with equal created times the greater manifest digest in byte order; with
// equal digests too the greater source id in byte order. It orders the
// versions of every source, so that the winner at a path does not depend
// on arrival order. A version never beats itself.
func Newer(a, b catalog.Source) bool {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c > 0
	}
	if a.Digest != b.Digest {
		return a.Digest > b.Digest
	}
	return a.ID > b.ID
}

// record is the catalog record a desired output gets when written now.
func record(in Input, d *Desired) catalog.Output {
	o := catalog.Output{
		Path: d.Path, PipelineID: in.Owner.PipelineID, DestinationID: in.Owner.DestinationID,
		Source: in.Source, Kind: d.Kind, SHA256: d.SHA256, Size: d.Size, URL: d.URL,
		CreatedAt: in.Now, UpdatedAt: in.Now,
	}
	if d.Kind == catalog.KindGenerated {
		o.SourcePath, o.Transform = d.From, d.Transform
	}
	return o
}

// next is the catalog after the plan: outs (cur's records in path order)
// with the items merged in, sized for the creates.
func next(in Input, cur *catalog.Catalog, outs []catalog.Output, items []Item, recOf []int32, creates int, changed bool) *catalog.Catalog {
	n := cur.Successor() // kept records are written as they were read
	n.Outputs = mergeItems(outs, items, recOf, len(outs)+creates)
	if in.Catalog == nil { // absent or legacy: a new v4 catalog
		n.CreatedAt = in.Now
	}
	if changed {
		n.UpdatedAt = in.Now
		if in.DistributorVersion != "" {
			n.DistributorVersion = in.DistributorVersion
		}
	}
	return n
}

// mergeItems is the next records: outs with the items' records in place
// of those they plan (recOf), by index, comparing no paths. A run of
// records that stay as they are (not planned, planned unchanged, or
// kept for a newer version) is copied at once.
func mergeItems(outs []catalog.Output, items []Item, recOf []int32, size int) []catalog.Output {
	n := make([]catalog.Output, 0, size)
	kept := 0 // outs[kept:] are not copied yet
	for j := range items {
		it, r := &items[j], int(recOf[j])
		switch {
		case r >= 0 && it.Action != Unchanged && it.Action != KeptNewer:
			n = appendEach(n, outs[kept:r])
			if it.Action != Delete {
				n = append(n, it.Record)
			}
			kept = r + 1
		case r < 0 && it.Action == Create:
			n = appendEach(n, outs[kept:-1-r])
			n = append(n, it.Record)
			kept = -1 - r
		}
	}
	return appendEach(n, outs[kept:])
}

// appendEach appends src to n one record at a time. One copy of a long
// run (a million records: 250 MB) was several times slower: while the
// collector marks, a bulk copy of pointerful memory runs its write barrier
// over the whole range at once and the copy stalls behind the marking (a
// publication adding 10 outputs to a million-record root: 4.6 -> 5.5 s).
func appendEach(n, src []catalog.Output) []catalog.Output {
	for i := range src { //nolint:staticcheck // S1011: one at a time on purpose (above)
		n = append(n, src[i])
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nested reports two paths of the sorted outputs of which one is a folder
// of the other.
func nested(sorted []*Desired) (string, string, bool) {
	for i := 0; i+1 < len(sorted); i++ {
		// In byte order "a/b" may not follow "a" directly ("a-c" sorts
		// between), so look ahead while the prefix still matches.
		a := sorted[i].Path
		for j := i + 1; j < len(sorted) && strings.HasPrefix(sorted[j].Path, a); j++ {
			if sorted[j].Path[len(a)] == '/' {
				return a, sorted[j].Path, true
			}
		}
	}
	return "", "", false
}

func displacedAt(displaced map[string]Item, path string) bool {
	if len(displaced) == 0 {
		return false
	}
	_, ok := displaced[path]
	return ok
}

// desiredAt reports whether the sorted outputs hold path.
func desiredAt(ds []*Desired, path string) bool {
	i := sort.Search(len(ds), func(i int) bool { return ds[i].Path >= path })
	return i < len(ds) && ds[i].Path == path
}

// recordIndex returns the index of the record at path in records sorted by
// path, or -1.
func recordIndex(outs []catalog.Output, path string) int {
	if i := sort.Search(len(outs), func(i int) bool { return outs[i].Path >= path }); i < len(outs) && outs[i].Path == path {
		return i
	}
	return -1
}

// findRecord returns the record at path in records sorted by path.
func findRecord(outs []catalog.Output, path string) *catalog.Output {
	i := sort.Search(len(outs), func(i int) bool { return outs[i].Path >= path })
	if i < len(outs) && outs[i].Path == path {
		return &outs[i]
	}
	return nil
}

// cursor finds places in sorted records for paths asked in ascending
// order (a republish asks for most records, one after the other): it
// steps a few records and searches only past a gap.
type cursor struct {
	outs []catalog.Output
	i    int
}

// seek returns the index of the first record not before p, and whether
// it is at p. Paths are asked in ascending order.
func (c *cursor) seek(p string) (int, bool) {
	outs, i := c.outs, c.i
	for k := 0; i < len(outs); k++ {
		if cmp := strings.Compare(outs[i].Path, p); cmp >= 0 {
			c.i = i
			return i, cmp == 0
		}
		if k == 4 {
			i += sort.Search(len(outs)-i, func(j int) bool { return outs[i+j].Path >= p })
			c.i = i
			return i, i < len(outs) && outs[i].Path == p
		}
		i++
	}
	c.i = i
	return i, false
}

// firstBelow returns the index of the first record not before p + "/",
// from p's place.
func firstBelow(outs []catalog.Output, p string, at place) int {
	k := int(at.at)
	if at.hit {
		k++
	}

	// Only paths that extend p by a byte below '/' ("p-1", "p.old") sort
	// between p and p + "/": rare, so searched.
	if k < len(outs) && len(outs[k].Path) > len(p) && outs[k].Path[len(p)] < '/' && strings.HasPrefix(outs[k].Path, p) {
		k += sort.Search(len(outs)-k, func(j int) bool { return cmpBelow(outs[k+j].Path, p) >= 0 })
	}
	return k
}

// treeConflicts returns, per desired path, the objects in its way, in path
// order: an object at one of the path's folders, or objects under the path
// itself. Objects are the stored ones and the records (sorted; a record
// whose bytes are missing must still leave the tree).
func treeConflicts(ds []*Desired, at []place, stored map[string]Stored, recs []catalog.Output) map[string][]string {
	if len(stored)+len(recs) == 0 {
		return nil
	}

	// The stored paths are sorted only when a desired path has stored
	// objects below it (rare: a republish finds files at its paths).
	folders := storedFolders(stored)
	var keys []string

	// Paths next to each other share their folders: the answer for the
	// folder at each depth is kept for the next path.
	var seen []folderSeen
	out := map[string][]string{}
	for i, d := range ds {
		p := d.Path
		depth := 0
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			f := p[:i]
			if depth == len(seen) {
				seen = append(seen, folderSeen{})
			}
			if sf := &seen[depth]; sf.folder != f || !sf.set {
				_, ok := stored[f]
				*sf = folderSeen{folder: f, set: true, taken: ok || findRecord(recs, f) != nil}
			}
			if seen[depth].taken {
				out[p] = append(out[p], f)
			}
			depth++
		}

		// Objects below p: stored or recorded, in path order, once each.
		j := len(keys)
		if len(folders) > 0 && folders[p] {
			if keys == nil {
				keys = sortedKeys(stored)
			}
			j = sort.Search(len(keys), func(i int) bool { return cmpBelow(keys[i], p) >= 0 })
		}
		if o := objectsBelow(p, keys, j, recs, firstBelow(recs, p, at[i])); o != nil {
			out[p] = append(out[p], o...)
		}
	}
	return out
}

// objectsBelow merges the stored keys from j and the records from k that
// lie below p, in path order, once each.
func objectsBelow(p string, keys []string, j int, recs []catalog.Output, k int) []string {
	var out []string
	for {
		a := j < len(keys) && isBelow(keys[j], p)
		b := k < len(recs) && isBelow(recs[k].Path, p)
		switch {
		case a && b && keys[j] == recs[k].Path:
			out = append(out, keys[j])
			j, k = j+1, k+1
		case a && (!b || keys[j] < recs[k].Path):
			out = append(out, keys[j])
			j++
		case b:
			out = append(out, recs[k].Path)
			k++
		default:
			return out
		}
	}
}

// isBelow reports whether s lies below folder p (has the prefix p + "/").
func isBelow(s, p string) bool {
	return len(s) > len(p) && s[len(p)] == '/' && s[:len(p)] == p
}

// cmpBelow compares s with p + "/" without building it.
func cmpBelow(s, p string) int {
	if len(s) <= len(p) {
		if c := strings.Compare(s, p[:len(s)]); c != 0 {
			return c
		}
		return -1 // a proper prefix of p + "/"
	}
	if c := strings.Compare(s[:len(p)], p); c != 0 {
		return c
	}
	switch {
	case s[len(p)] < '/':
		return -1
	case s[len(p)] > '/':
		return 1
	case len(s) > len(p)+1:
		return 1
	}
	return 0
}

// folderSeen is whether the folder of a path is taken by an object.
type folderSeen struct {
	folder     string
	set, taken bool
}

// storedFolders is the set of folders that hold a stored object, at any
// depth.
func storedFolders(stored map[string]Stored) map[string]bool {
	folders := map[string]bool{}
	for p := range stored {
		for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
			if folders[p[:i]] {
				break // and its folders too
			}
			folders[p[:i]] = true
		}
	}
	return folders
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
