package planner

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

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
	// newer version of the same source (an operator's roll back).
	AllowOlder bool
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
)

// Item is the plan for one path.
type Item struct {
	Path   string
	Action Action
	// Write is true when the bytes must be (re)written.
	Write bool
	// Desired is set for create, update, unchanged and collision.
	Desired *Desired
	// Record is the record after the plan (create/update/unchanged) or the
	// record being removed (delete).
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
	// Superseded is set when the owner already holds a newer version of the
	// same source (see Newer): the plan has no items, writes and deletes
	// nothing, and Next is nil. It names the version that won.
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
func Build(in Input) (Plan, error) {
	p := Plan{Owner: in.Owner, Workflow: in.Workflow}
	if len(in.Desired) > 0 {
		p.Items = make([]Item, 0, len(in.Desired))
	}
	if err := checkInput(in); err != nil {
		return p, err
	}
	// Newest wins: an older version arriving late (redelivery, parallel
	// workers, a slow producer) must not roll the owner's outputs back.
	if won, ok := newest(in.Catalog, in.Owner, in.Source.ID); ok && !in.AllowOlder && Newer(won, in.Source) {
		p.Items = nil
		p.Superseded = &won
		return p, nil
	}
	desired, err := indexDesired(in)
	if err != nil {
		return p, err
	}

	keys := desiredKeys(in.Desired)
	if a, b, ok := nested(keys); ok {
		return p, fmt.Errorf("%w: %q and %q (a path cannot be a file and a folder)", ErrPathConflict, a, b)
	}
	// An object where a planned output needs a folder, or objects below a
	// planned output's path, are in the way: a folder tree cannot hold both
	// (and on S3 the roots would stop mirroring each other).
	way := treeConflicts(keys, in.Stored, in.Catalog)

	cur := in.Catalog
	if cur == nil {
		cur = &catalog.Catalog{}
	}
	records := cur.Finder()
	blocked, displaced := sortOutTheWay(in, keys, way, records)
	ahead := cur.Ascending()
	for _, path := range keys {
		it := planPath(in, desired[path], blocked[path], ahead)
		if it.Action == Collision {
			p.Collisions = append(p.Collisions, path)
		}
		p.Items = append(p.Items, it)
	}

	if in.Workflow == Replacement {
		if err := planReplacement(&p, in, cur, desired, displaced); err != nil {
			return p, err
		}
	}
	for _, path := range sortedKeys(displaced) {
		p.Items = append(p.Items, displaced[path])
	}
	sort.SliceStable(p.Items, func(i, j int) bool { return p.Items[i].Path < p.Items[j].Path })

	if n := p.Count(Delete) + len(p.Clear); in.MaxDeletes > 0 && n > in.MaxDeletes {
		return p, fmt.Errorf("%w: %d deletes, max_deletes is %d; nothing was deleted", ErrTooManyDeletes, n, in.MaxDeletes)
	}
	if p.Blocked() {
		return p, nil
	}
	p.Next, p.Changed = next(in, cur, p.Items)
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

// indexDesired maps the desired outputs by path, refusing bad paths,
// duplicates and records the next catalog could not hold.
func indexDesired(in Input) (map[string]*Desired, error) {
	desired := make(map[string]*Desired, len(in.Desired))
	for i := range in.Desired {
		d := &in.Desired[i]
		if err := catalog.ValidateOutputPath(d.Path); err != nil {
			return nil, err
		}
		if prev, dup := desired[d.Path]; dup {
			return nil, fmt.Errorf("%w: %q from %q and %q", ErrDuplicateOutput, d.Path, prev.From, d.From)
		}
		// Refuse here what the next catalog could not hold (bad digest,
		// kind, source identity), rather than failing after the writes.
		if err := record(in, d).ValidateFields(); err != nil { // the path is checked above
			return nil, fmt.Errorf("planner: desired output %w", err)
		}
		desired[d.Path] = d
	}
	return desired, nil
}

// sortOutTheWay splits what is in the way of each planned path into the
// paths it blocks (with the unmanaged content blocking them) and the
// managed outputs it displaces.
//
// Managed outputs in the way are displaced (deleted before the writes,
// like any overwrite of a managed output); so is legacy content, which
// a legacy first run rewrites or clears anyway. Unmanaged content in
// the way blocks the path, --take-ownership or not: adoption takes
// over a path, it does not turn a file into a folder.
func sortOutTheWay(in Input, keys []string, way map[string][]string, records func(string) (catalog.Output, bool)) (map[string][]string, map[string]Item) {
	blocked := map[string][]string{}
	displaced := map[string]Item{}
	for _, path := range keys {
		var unmanaged []string
		for _, o := range way[path] {
			if _, managed := records(o); !managed && !in.Legacy {
				unmanaged = append(unmanaged, o)
			}
		}
		if len(unmanaged) > 0 {
			blocked[path] = unmanaged
			continue
		}
		for _, o := range way[path] {
			rec, _ := records(o)
			displaced[o] = Item{Path: o, Action: Delete, Displaced: true, Record: rec}
		}
	}
	return blocked, displaced
}

// planPath decides what happens to one desired output; inTheWay is the
// unmanaged content blocking its path, if any.
func planPath(in Input, d *Desired, inTheWay []string, records func(string) (catalog.Output, bool)) Item {
	path := d.Path
	rec := record(in, d)
	old, managed := records(path)
	stored, exists := in.Stored[path]
	switch {
	case inTheWay != nil:
		return Item{Path: path, Action: Collision, Desired: d, InTheWay: inTheWay}
	case managed:
		rec.CreatedAt = old.CreatedAt
		write := old.SHA256 != d.SHA256 || !exists || stored.Size != d.Size || stored.Damaged
		if !write && rec.SameContent(old) {
			return Item{Path: path, Action: Unchanged, Desired: d, Record: old}
		}
		return Item{Path: path, Action: Update, Write: write, Desired: d, Record: rec}
	case exists && !in.Legacy && !in.TakeOwnership:
		return Item{Path: path, Action: Collision, Desired: d}
	default:
		return Item{Path: path, Action: Create, Write: true, Desired: d, Record: rec,
			Adopted: exists && !in.Legacy}
	}
}

// planReplacement adds the deletes of a replacement: the owner's outputs
// it no longer desires and, on a legacy root, the stored content to clear.
func planReplacement(p *Plan, in Input, cur *catalog.Catalog, desired map[string]*Desired, displaced map[string]Item) error {
	owned := 0
	for _, old := range cur.Outputs {
		if old.Owner() != in.Owner {
			continue
		}
		owned++
		if _, keep := desired[old.Path]; !keep && !displacedAt(displaced, old.Path) {
			p.Items = append(p.Items, Item{Path: old.Path, Action: Delete, Record: old})
		}
	}
	if in.Legacy {
		for _, path := range sortedKeys(in.Stored) {
			if _, keep := desired[path]; !keep && !catalog.IsReserved(path) && !displacedAt(displaced, path) {
				p.Clear = append(p.Clear, path)
			}
		}
	}
	// An empty legacy replacement would clear the whole root: as broken.
	if len(desired) == 0 && (owned > 0 || len(p.Clear) > 0) {
		return ErrEmptyReplacement
	}
	return nil
}

// Newer reports whether version a of a source beats version b: a later
// created time, or with equal created times the greater digest in byte
// order, so that the winner does not depend on arrival order. A version
// never beats itself.
func Newer(a, b catalog.Source) bool {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c > 0
	}
	return a.Digest > b.Digest
}

// newest returns the newest version of source id among owner's records.
func newest(c *catalog.Catalog, owner catalog.Owner, id string) (catalog.Source, bool) {
	var best catalog.Source
	found := false
	if c == nil {
		return best, false
	}
	for _, o := range c.Outputs {
		if o.Owner() != owner || o.Source.ID != id {
			continue
		}
		if !found || Newer(o.Source, best) {
			best, found = o.Source, true
		}
	}
	return best, found
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

func next(in Input, cur *catalog.Catalog, items []Item) (*catalog.Catalog, bool) {
	n := cur.Successor()       // kept records are written as they were read
	fresh := in.Catalog == nil // absent or legacy: a new v4 catalog
	changed := fresh
	for _, it := range items {
		if it.Action != Unchanged {
			changed = true
			break
		}
	}
	// Kept records stay in cur's order (a replacement has its record's path).
	if cur.InOrder() && slices.IsSortedFunc(items, func(a, b Item) int { return strings.Compare(a.Path, b.Path) }) {
		n.Outputs = mergeItems(cur.Outputs, items)
	} else {
		n.Outputs = indexItems(cur.Outputs, items)
		n.Sort()
	}
	if fresh {
		n.CreatedAt = in.Now
	}
	if changed {
		n.UpdatedAt = in.Now
		if in.DistributorVersion != "" {
			n.DistributorVersion = in.DistributorVersion
		}
	}
	return n, changed
}

// mergeItems is the next records when both the records and the items are
// in path order: one pass over both, no index of a republish's 10,000
// items.
func mergeItems(outs []catalog.Output, items []Item) []catalog.Output {
	n := make([]catalog.Output, 0, len(outs)+len(items))
	j := 0
	for _, old := range outs {
		for ; j < len(items) && items[j].Path < old.Path; j++ {
			if items[j].Action == Create {
				n = append(n, items[j].Record)
			}
		}
		if j < len(items) && items[j].Path == old.Path {
			if items[j].Action != Delete {
				n = append(n, items[j].Record)
			}
			j++
			continue
		}
		n = append(n, old)
	}
	for ; j < len(items); j++ {
		if items[j].Action == Create {
			n = append(n, items[j].Record)
		}
	}
	return n
}

// indexItems is the next records, unsorted, for records or items out of
// path order.
func indexItems(outs []catalog.Output, items []Item) []catalog.Output {
	byPath := make(map[string]Item, len(items))
	for _, it := range items {
		byPath[it.Path] = it
	}
	n := make([]catalog.Output, 0, len(outs)+len(byPath))
	for _, old := range outs {
		if it, ok := byPath[old.Path]; ok {
			if it.Action != Delete {
				n = append(n, it.Record)
			}
			delete(byPath, old.Path)
			continue
		}
		n = append(n, old)
	}
	for _, it := range byPath {
		if it.Action == Create {
			n = append(n, it.Record)
		}
	}
	return n
}

// desiredKeys returns the desired paths sorted (indexDesired refused
// duplicates); a manifest lists them sorted already.
func desiredKeys(desired []Desired) []string {
	keys := make([]string, len(desired))
	for i := range desired {
		keys[i] = desired[i].Path
	}
	if !slices.IsSorted(keys) {
		slices.Sort(keys)
	}
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nested reports two sorted paths of which one is a folder of the other.
func nested(sorted []string) (string, string, bool) {
	for i := 0; i+1 < len(sorted); i++ {
		// In byte order "a/b" may not follow "a" directly ("a-c" sorts
		// between), so look ahead while the prefix still matches.
		for j := i + 1; j < len(sorted) && strings.HasPrefix(sorted[j], sorted[i]); j++ {
			if sorted[j][len(sorted[i])] == '/' {
				return sorted[i], sorted[j], true
			}
		}
	}
	return "", "", false
}

func displacedAt(displaced map[string]Item, path string) bool {
	_, ok := displaced[path]
	return ok
}

// treeConflicts returns, per desired path, the objects in its way, in path
// order: an object at one of the path's folders, or objects under the path
// itself. Objects are the stored ones and the catalog's records (a record
// whose bytes are missing must still leave the tree).
func treeConflicts(desired []string, stored map[string]Stored, cat *catalog.Catalog) map[string][]string {
	// Record paths, sorted, searched in place: a root's catalog may hold a
	// million records and a publication touch ten paths.
	var recs []string
	if cat != nil {
		recs = make([]string, len(cat.Outputs))
		for i, o := range cat.Outputs {
			recs[i] = o.Path
		}
		if !sort.StringsAreSorted(recs) {
			sort.Strings(recs)
		}
	}
	if len(stored)+len(recs) == 0 {
		return nil
	}
	// The stored paths are sorted only when a desired path has stored
	// objects below it (rare: a republish finds files at its paths).
	folders := storedFolders(stored)
	var keys []string
	recorded := func(p string) bool {
		j := sort.SearchStrings(recs, p)
		return j < len(recs) && recs[j] == p
	}
	// Paths next to each other share their folders: the answer for the
	// folder at each depth is kept for the next path.
	var seen []folderSeen
	belowRecs := seeker{s: recs}
	out := map[string][]string{}
	for _, p := range desired {
		depth := 0
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			f := p[:i]
			if depth == len(seen) {
				seen = append(seen, folderSeen{})
			}
			if sf := &seen[depth]; sf.folder != f || !sf.set {
				_, ok := stored[f]
				*sf = folderSeen{folder: f, set: true, taken: ok || recorded(f)}
			}
			if seen[depth].taken {
				out[p] = append(out[p], f)
			}
			depth++
		}
		// Objects below p: stored or recorded, in path order, once each.
		below := p + "/"
		if folders[p] && keys == nil {
			keys = sortedKeys(stored)
		}
		j := len(keys)
		if folders[p] {
			j = sort.SearchStrings(keys, below)
		}
		k := belowRecs.find(below)
	merge:
		for {
			a := j < len(keys) && strings.HasPrefix(keys[j], below)
			b := k < len(recs) && strings.HasPrefix(recs[k], below)
			switch {
			case a && b && keys[j] == recs[k]:
				out[p] = append(out[p], keys[j])
				j, k = j+1, k+1
			case a && (!b || keys[j] < recs[k]):
				out[p] = append(out[p], keys[j])
				j++
			case b:
				out[p] = append(out[p], recs[k])
				k++
			default:
				break merge
			}
		}
	}
	return out
}

// folderSeen is whether the folder of a path is taken by an object.
type folderSeen struct {
	folder     string
	set, taken bool
}

// seeker finds where strings go in sorted s, starting from its previous
// answer: asked in ascending order (sorted desired paths), it steps a few
// places instead of searching all of s each time.
type seeker struct {
	s  []string
	at int
}

func (k *seeker) find(x string) int {
	i := k.at
	if i > 0 && k.s[i-1] >= x {
		i = 0 // asked out of order: search from the start
	}
	for n := 0; i < len(k.s) && k.s[i] < x; n++ {
		if n == 4 {
			i += sort.SearchStrings(k.s[i:], x)
			break
		}
		i++
	}
	k.at = i
	return i
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
