package planner

// A plainer planner that walks its inputs in several passes (names ref...):
// the reference TestBuildMatchesReference compares Build with, input by
// input. It follows the same rules, an additive publication's newest wins
// per path included.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/distributor/distributor/catalog"
)

// refBuild plans one publication on one root.
func refBuild(in Input) (Plan, error) {
	p := Plan{Owner: in.Owner, Source: in.Source, Workflow: in.Workflow}
	if len(in.Desired) > 0 {
		p.Items = make([]Item, 0, len(in.Desired))
	}
	if err := refCheckInput(in); err != nil {
		return p, err
	}
	// Newest wins: an older version arriving late (redelivery, parallel
	// workers, a slow producer) must not roll the owner's outputs back.
	won, ok := refNewest(in.Catalog, in.Owner, in.Source.ID)
	older := ok && !in.AllowOlder && Newer(won, in.Source)
	if in.Workflow == Additive {
		// Any of the owner's sources counts, per path (below).
		anyWon, anyOK := refNewestOfAny(in.Catalog, in.Owner)
		older = anyOK && !in.AllowOlder && Newer(anyWon, in.Source)
	}
	if older && in.Workflow == Replacement {
		p.Items = nil
		p.Superseded = &won
		return p, nil
	}
	desired, err := refIndexDesired(in)
	if err != nil {
		return p, err
	}

	keys := refDesiredKeys(in.Desired)
	if a, b, ok := refNested(keys); ok {
		return p, fmt.Errorf("%w: %q and %q (a path cannot be a file and a folder)", ErrPathConflict, a, b)
	}
	// An object where a planned output needs a folder, or objects below a
	// planned output's path, are in the way: a folder tree cannot hold both
	// (and on S3 the roots would stop mirroring each other).
	way := refTreeConflicts(keys, in.Stored, in.Catalog)

	cur := in.Catalog
	if cur == nil {
		cur = &catalog.Catalog{}
	}
	records := cur.Finder()
	// An older additive publication leaves alone the paths where a newer
	// version of the owner's (of any source) is recorded or in the way.
	kept := map[string]bool{}
	if older {
		newer := func(path string) bool {
			r, ok := records(path)
			return ok && r.Owner() == in.Owner && Newer(r.Source, in.Source)
		}
		for _, path := range keys {
			if newer(path) || slices.ContainsFunc(way[path], newer) {
				kept[path] = true
				delete(way, path)
			}
		}
	}
	blocked, displaced := refSortOutTheWay(in, keys, way, records)
	ahead := cur.Ascending()
	for _, path := range keys {
		if kept[path] {
			rec, _ := records(path)
			p.Items = append(p.Items, Item{Path: path, Action: KeptNewer, Desired: desired[path], Record: rec})
			continue
		}
		it := refPlanPath(in, desired[path], blocked[path], ahead)
		if it.Action == Collision {
			p.Collisions = append(p.Collisions, path)
		}
		p.Items = append(p.Items, it)
	}

	if in.Workflow == Replacement {
		if err := refPlanReplacement(&p, in, cur, desired, displaced); err != nil {
			return p, err
		}
	}
	if in.Workflow == Additive && in.AllowOlder && in.DeleteLater {
		// A roll back asked to delete later versions deletes the owner's
		// records of newer versions of its source that it does not
		// rewrite.
		for _, old := range cur.Outputs {
			if _, keep := desired[old.Path]; !keep && old.Owner() == in.Owner && old.Source.ID == in.Source.ID &&
				Newer(old.Source, in.Source) && !refDisplacedAt(displaced, old.Path) {
				p.Items = append(p.Items, Item{Path: old.Path, Action: Delete, Record: old})
			}
		}
	}
	for _, path := range refSortedKeys(displaced) {
		p.Items = append(p.Items, displaced[path])
	}
	sort.SliceStable(p.Items, func(i, j int) bool { return p.Items[i].Path < p.Items[j].Path })

	if n := p.Count(Delete) + len(p.Clear); in.MaxDeletes > 0 && n > in.MaxDeletes {
		return p, fmt.Errorf("%w: %d deletes, max_deletes is %d; nothing was deleted", ErrTooManyDeletes, n, in.MaxDeletes)
	}
	if p.Blocked() {
		return p, nil
	}
	p.Next, p.Changed = refNext(in, cur, p.Items)
	return p, nil
}

// refCheckInput refuses an input refBuild cannot plan.
func refCheckInput(in Input) error {
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

// refIndexDesired maps the desired outputs by path, refusing bad paths,
// duplicates and records the next catalog could not hold.
func refIndexDesired(in Input) (map[string]*Desired, error) {
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
		if err := refRecord(in, d).ValidateFields(); err != nil { // the path is checked above
			return nil, fmt.Errorf("planner: desired output %w", err)
		}
		desired[d.Path] = d
	}
	return desired, nil
}

// refSortOutTheWay splits what is in the way of each planned path into the
// paths it blocks (with the unmanaged content blocking them) and the
// managed outputs it displaces.
//
// Managed outputs in the way are displaced (deleted before the writes,
// like any overwrite of a managed output); so is legacy content, which
// a legacy first run rewrites or clears anyway. Unmanaged content in
// the way blocks the path, --take-ownership or not: adoption takes
// over a path, it does not turn a file into a folder.
func refSortOutTheWay(in Input, keys []string, way map[string][]string, records func(string) (catalog.Output, bool)) (map[string][]string, map[string]Item) {
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

// refPlanPath decides what happens to one desired output; inTheWay is the
// unmanaged content blocking its path, if any.
func refPlanPath(in Input, d *Desired, inTheWay []string, records func(string) (catalog.Output, bool)) Item {
	path := d.Path
	rec := refRecord(in, d)
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

// refPlanReplacement adds the deletes of a replacement: the owner's outputs
// it no longer desires and, on a legacy root, the stored content to clear.
func refPlanReplacement(p *Plan, in Input, cur *catalog.Catalog, desired map[string]*Desired, displaced map[string]Item) error {
	owned := 0
	for _, old := range cur.Outputs {
		if old.Owner() != in.Owner {
			continue
		}
		owned++
		if _, keep := desired[old.Path]; !keep && !refDisplacedAt(displaced, old.Path) {
			p.Items = append(p.Items, Item{Path: old.Path, Action: Delete, Record: old})
		}
	}
	if in.Legacy {
		for _, path := range refSortedKeys(in.Stored) {
			if _, keep := desired[path]; !keep && !catalog.IsReserved(path) && !refDisplacedAt(displaced, path) {
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

// refNewestOfAny returns the newest source version among owner's records.
func refNewestOfAny(c *catalog.Catalog, owner catalog.Owner) (catalog.Source, bool) {
	var best catalog.Source
	found := false
	if c == nil {
		return best, false
	}
	for _, o := range c.Outputs {
		if o.Owner() == owner && (!found || Newer(o.Source, best)) {
			best, found = o.Source, true
		}
	}
	return best, found
}

// refNewest returns the newest version of source id among owner's records.
func refNewest(c *catalog.Catalog, owner catalog.Owner, id string) (catalog.Source, bool) {
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

// refRecord is the catalog record a desired output gets when written now.
func refRecord(in Input, d *Desired) catalog.Output {
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

func refNext(in Input, cur *catalog.Catalog, items []Item) (*catalog.Catalog, bool) {
	n := cur.Successor()       // kept records are written as they were read
	fresh := in.Catalog == nil // absent or legacy: a new v4 catalog
	changed := fresh
	for _, it := range items {
		if it.Action != Unchanged && it.Action != KeptNewer {
			changed = true
			break
		}
	}
	// Kept records stay in cur's order (a replacement has its record's path).
	if cur.InOrder() && slices.IsSortedFunc(items, func(a, b Item) int { return strings.Compare(a.Path, b.Path) }) {
		n.Outputs = refMergeItems(cur.Outputs, items)
	} else {
		n.Outputs = refIndexItems(cur.Outputs, items)
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

// refMergeItems is the next records when both the records and the items are
// in path order: one pass over both, no index of a republish's 10,000
// items.
func refMergeItems(outs []catalog.Output, items []Item) []catalog.Output {
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

// refIndexItems is the next records, unsorted, for records or items out of
// path order.
func refIndexItems(outs []catalog.Output, items []Item) []catalog.Output {
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

// refDesiredKeys returns the desired paths sorted (indexDesired refused
// duplicates); a manifest lists them sorted already.
func refDesiredKeys(desired []Desired) []string {
	keys := make([]string, len(desired))
	for i := range desired {
		keys[i] = desired[i].Path
	}
	if !slices.IsSorted(keys) {
		slices.Sort(keys)
	}
	return keys
}

func refSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// refNested reports two sorted paths of which one is a folder of the other.
func refNested(sorted []string) (string, string, bool) {
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

func refDisplacedAt(displaced map[string]Item, path string) bool {
	_, ok := displaced[path]
	return ok
}

// refTreeConflicts returns, per desired path, the objects in its way, in path
// order: an object at one of the path's folders, or objects under the path
// itself. Objects are the stored ones and the catalog's records (a record
// whose bytes are missing must still leave the tree).
func refTreeConflicts(desired []string, stored map[string]Stored, cat *catalog.Catalog) map[string][]string {
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
	folders := refStoredFolders(stored)
	var keys []string
	recorded := func(p string) bool {
		j := sort.SearchStrings(recs, p)
		return j < len(recs) && recs[j] == p
	}
	// Paths next to each other share their folders: the answer for the
	// folder at each depth is kept for the next path.
	var seen []refFolderSeen
	belowRecs := refSeeker{s: recs}
	out := map[string][]string{}
	for _, p := range desired {
		depth := 0
		for i := strings.IndexByte(p, '/'); i >= 0; i = refNextSlash(p, i) {
			f := p[:i]
			if depth == len(seen) {
				seen = append(seen, refFolderSeen{})
			}
			if sf := &seen[depth]; sf.folder != f || !sf.set {
				_, ok := stored[f]
				*sf = refFolderSeen{folder: f, set: true, taken: ok || recorded(f)}
			}
			if seen[depth].taken {
				out[p] = append(out[p], f)
			}
			depth++
		}
		// Objects below p: stored or recorded, in path order, once each.
		below := p + "/"
		if folders[p] && keys == nil {
			keys = refSortedKeys(stored)
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

// refFolderSeen is whether the folder of a path is taken by an object.
type refFolderSeen struct {
	folder     string
	set, taken bool
}

// refSeeker finds where strings go in sorted s, starting from its previous
// answer: asked in ascending order (sorted desired paths), it steps a few
// places instead of searching all of s each time.
type refSeeker struct {
	s  []string
	at int
}

func (k *refSeeker) find(x string) int {
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

// refStoredFolders is the set of folders that hold a stored object, at any
// depth.
func refStoredFolders(stored map[string]Stored) map[string]bool {
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

func refNextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
