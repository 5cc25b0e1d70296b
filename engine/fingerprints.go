package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// FingerprintsDir holds the fingerprint index, one file per shard.
const FingerprintsDir = catalog.ReservedDir + "/fingerprints"

const (
	maxFingerprintShards = 256

	// fingerprintsPerShard sizes the index to its root: a republish of
	// most outputs reads and rewrites every shard (on S3 a request each),
	// so a small root keeps few shards; a small publication to a big root
	// reads only its paths' shards, so a big root keeps many.
	fingerprintsPerShard = 1024
	fingerprintsHeader   = "distributor-fingerprints 1"

	// fingerprintsSum starts the line after the header that holds the
	// sha256 (hex) of the rest of the shard. A shard rewritten in place
	// (storage.PutOptions.InPlace) may be read torn; one whose sum does not match
	// counts as missing (its outputs are hashed once). A shard without
	// the line (written whole, by rename or on S3, also by older
	// versions) is read without the check; older versions skip the line
	// (it has no tabs).
	fingerprintsSum = "#sha256 "
)

// FingerprintShards is the number of index shards of a root whose catalog
// records n outputs: the smallest power of two holding about 1024 entries
// per shard, at most 256. Readers take n from the catalog they read, the
// writer from the catalog it commits, so both agree on the layout.
func FingerprintShards(n int) int {
	k := 1
	for k < maxFingerprintShards && k*fingerprintsPerShard < n {
		k *= 2
	}
	return k
}

// FingerprintsFile is the shard file that holds path's entry in an index
// of the given number of shards (FingerprintShards).
func FingerprintsFile(path string, shards int) string {
	// FNV-1a, inline: this runs for every written path.
	h := uint32(2166136261)
	for i := 0; i < len(path); i++ {
		h ^= uint32(path[i])
		h *= 16777619
	}
	return shardFile(h%uint32(shards), shards)
}

// shardFile names shard n of an index of the given size: "0a" for 256
// shards (the layout of every root before the index was sized), "16-0a"
// for 16.
func shardFile(n uint32, shards int) string {
	const hexDigits = "0123456789abcdef"
	name := string([]byte{hexDigits[n>>4&15], hexDigits[n&15]})
	if shards != maxFingerprintShards {
		name = strconv.Itoa(shards) + "-" + name
	}
	return FingerprintsDir + "/" + name
}

// known is what a holder knew of one stored version.
type known struct {
	fingerprint string
	sha256      string
}

// fingerprints is the part of a root's index that a publication loaded:
// entries of the loaded shards, and which shards changed.
type fingerprints struct {
	mu sync.Mutex

	// shards is the layout the index was read in (FingerprintShards of
	// the catalog read).
	shards  int
	entries map[string]known
	loaded  map[string]bool // shard files read (true: it existed)
	dirty   map[string]bool // shard files to write back

	// want, when set, are the paths whose entries a load keeps (the
	// publication's): a root of a million outputs has a million entries,
	// and a publication keeping a thousand reads every shard. partial are
	// the shards loaded whose other entries were left: saving one reads
	// it again.
	want    map[string]bool
	partial map[string]bool

	// retired are the files of the layout the index moved away from,
	// removed once the new layout is written.
	retired []string
}

func newFingerprints(shards int) *fingerprints {
	return &fingerprints{shards: shards, entries: map[string]known{}, loaded: map[string]bool{}, dirty: map[string]bool{}, partial: map[string]bool{}}
}

// load reads the shards of paths that are not loaded yet: whole where
// they are about to be written (each is then read once), else only the
// entries f wants. A missing or unreadable shard is empty (it only costs
// hashing); an unreachable backend is an error.
func (e *Engine) loadFingerprints(ctx context.Context, root storage.Backend, f *fingerprints, paths []string, whole bool) error {
	if len(f.loaded) == f.shards {
		return nil // every shard is read (a large publication reads them up front)
	}
	var shards []string
	seen := map[string]bool{}
	for _, p := range paths {
		if sh := FingerprintsFile(p, f.shards); !loaded(f, sh) && !seen[sh] {
			seen[sh] = true
			shards = append(shards, sh)
		}
	}
	return e.loadShards(ctx, root, f, shards, whole)
}

// loadForRewrite readies the shards of paths, about to be written, for
// their rewrite: loaded whole now where the index is held whole (whole,
// or no want), else marked partial, unread: a thousand writes to a large
// root touch every shard, and each is read once, when it is rewritten,
// its other entries spliced in (encodeShard).
func (e *Engine) loadForRewrite(ctx context.Context, root storage.Backend, f *fingerprints, paths []string, whole bool) error {
	if whole || f.want == nil {
		return e.loadFingerprints(ctx, root, f, paths, true)
	}
	for _, p := range paths {
		if sh := FingerprintsFile(p, f.shards); !loaded(f, sh) {
			f.partial[sh] = true
		}
	}
	return nil
}

// loadShards reads the shard files named (see loadFingerprints).
func (e *Engine) loadShards(ctx context.Context, root storage.Backend, f *fingerprints, shards []string, whole bool) error {
	// Shards are read in parallel: on S3 each is a request, and a large
	// republish touches most of them.
	parsed := make([][]fingerprintEntry, len(shards))
	found := make([]bool, len(shards))
	dropped := make([]bool, len(shards))
	var keep func(string) bool
	if f.want != nil && !whole {
		keep = func(p string) bool { return f.want[p] }
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, sh := range shards {
		g.Go(func() error {
			data, _, err := root.ReadVersion(gctx, sh)
			if err != nil {
				if errors.Is(err, storage.ErrUnavailable) || gctx.Err() != nil {
					return err
				}
				e.Log.Debug().Err(err).Str("root", root.String()).Str("shard", sh).Msg("fingerprint shard unreadable; its outputs are hashed once")
				data = nil
			}
			if data != nil {
				parsed[i], dropped[i] = parseFingerprints(data, keep)
				found[i] = true
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(f.entries) == 0 { // sized once: growing it rehashed every entry a few times
		n := 0
		for _, es := range parsed {
			n += len(es)
		}
		f.entries = make(map[string]known, n)
	}
	for i, sh := range shards {
		for _, en := range parsed[i] {
			if _, newer := f.entries[en.path]; !newer { // set since, or loaded whole before
				f.entries[en.path] = en.known
			}
		}
		f.loaded[sh] = found[i]
		f.partial[sh] = dropped[i]
	}
	return nil
}

// fingerprintEntry is one line of a shard: what is known of path.
type fingerprintEntry struct {
	path string
	known
}

// parseFingerprints reads "sha256 TAB fingerprint TAB path" lines after the
// header and the checksum line. A shard without the checksum line, or
// whose sum does not match, has no entries: shards are rewritten in place
// (storage.PutOptions.InPlace), and only the sum tells a torn copy, a
// mix of two versions, from a whole one. Paths cannot hold tabs or
// newlines (catalog path rules). The entries' strings point into data,
// which the caller gives up (a copy, or a string per line, cost more than
// the parse). With keep, only the entries of the paths it keeps are
// returned, with strings of their own, and dropped says whether it left
// any.
func parseFingerprints(data []byte, keep func(string) bool) (_ []fingerprintEntry, dropped bool) {
	rest, ok := shardBody(data)
	if !ok {
		return nil, false // torn (or damaged): hashed once instead
	}
	size := strings.Count(rest, "\n")
	if keep != nil {
		size = 0
	}
	out := make([]fingerprintEntry, 0, size)
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		sha, tail, ok1 := strings.Cut(line, "\t")
		fp, path, ok2 := strings.Cut(tail, "\t")
		switch {
		case !ok1 || !ok2 || sha == "" || fp == "" || path == "":
		case keep == nil || keep(path):
			out = append(out, fingerprintEntry{path, known{fingerprint: fp, sha256: sha}})
		default:
			dropped = true
		}
	}
	if dropped {
		// The entries kept get strings of their own: the shard's bytes are
		// left to the collector.
		for i, en := range out {
			out[i] = fingerprintEntry{strings.Clone(en.path), known{fingerprint: strings.Clone(en.fingerprint), sha256: strings.Clone(en.sha256)}}
		}
	}
	return out, dropped
}

// shardBody is the entry lines of a shard (pointing into data), after the
// header and the checksum line; ok is false for a shard without the sum
// line or whose sum does not match (torn or damaged), and for none.
func shardBody(data []byte) (_ string, ok bool) {
	if len(data) == 0 {
		return "", false
	}
	text := unsafe.String(unsafe.SliceData(data), len(data))
	header, rest, ok := strings.Cut(text, "\n")
	if !ok || strings.TrimSuffix(header, "\r") != fingerprintsHeader || !strings.HasPrefix(rest, fingerprintsSum) {
		return "", false
	}
	line, rest, _ := strings.Cut(rest, "\n")
	sum := sha256.Sum256(data[len(data)-len(rest):])
	if line[len(fingerprintsSum):] != hex.EncodeToString(sum[:]) {
		return "", false
	}
	return rest, true
}

// set records what is known of path's stored version.
func (f *fingerprints) set(path string, k known) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[path] = k
	f.dirty[FingerprintsFile(path, f.shards)] = true
}

// vouches reports whether the entry for path names the stored version and
// says it holds sha.
func (f *fingerprints) vouches(path string, stored planner.Stored, sha string) bool {
	k, ok := f.entries[path]
	return ok && k.fingerprint == stored.Fingerprint && k.sha256 == sha
}

// encodeShard renders shard sh: the entries loaded (paths, managed, of
// that shard) and, where the load left the shard's other entries
// (partial), those read again now that cat still records. With drops
// (dropsByShard), those are spliced in as the stored shard holds them,
// unless the shard holds more lines than its share of the catalog
// (entries of paths that maintenance dropped): then, as without drops,
// every entry read is checked against the catalog.
func (f *fingerprints) encodeShard(ctx context.Context, root storage.Backend, sh string, paths []string, drops map[string][]string, cat recorded) ([]byte, error) {
	if !f.partial[sh] {
		return f.encode(paths, f.entries), nil
	}
	data, _, err := root.ReadVersion(ctx, sh)
	if err != nil {
		return nil, err
	}
	if drops != nil {
		share := cat.count() / f.shards
		if out, kept, ok := spliceShard(data, drops[sh], paths, f.entries); ok && kept <= share+share/4+64 {
			return out, nil
		}
	}
	read, _ := parseFingerprints(data, nil)
	all := make(map[string]known, len(read)+len(paths))
	for _, en := range read {
		if _, loaded := f.entries[en.path]; !loaded && cat.has(en.path) {
			all[en.path] = en.known
			paths = append(paths, en.path)
		}
	}
	for _, p := range paths {
		if k, ok := f.entries[p]; ok {
			all[p] = k
		}
	}
	return f.encode(paths, all), nil
}

// spliceShard renders a shard from the bytes of its stored version (data)
// as encode would from its entries, without parsing the lines it keeps:
// the runs of lines between the changed ones are copied as they lie. The
// lines of the paths of drop (sorted) and add (sorted here) go; add's are
// rendered from entries. A stored shard that is missing, torn or damaged
// keeps no line. ok is false for one not in encode's
// form (lines out of path order, or one parseFingerprints skips or
// trims); kept is how many lines were copied.
func spliceShard(data []byte, drop, add []string, entries map[string]known) (_ []byte, kept int, ok bool) {
	body, summed := shardBody(data)
	if !summed {
		body = ""
	}
	if !sort.StringsAreSorted(add) {
		sort.Strings(add)
	}
	head := len(fingerprintsHeader) + 1 + len(fingerprintsSum) + 2*sha256.Size + 1
	size := head + len(body)
	for _, p := range add {
		size += len(entries[p].sha256) + len(entries[p].fingerprint) + len(p) + 3
	}
	buf := make([]byte, head, size)
	run, prev := 0, "" // run: where the lines not yet copied start
	for pos := 0; pos < len(body); {
		n := strings.IndexByte(body[pos:], '\n')
		if n < 0 {
			return nil, 0, false
		}
		p, valid := linePath(body[pos : pos+n])
		if !valid || (pos > 0 && p <= prev) {
			return nil, 0, false
		}
		prev = p
		for len(add) > 0 && add[0] < p {
			buf = appendLine(append(buf, body[run:pos]...), add[0], entries[add[0]])
			run, add = pos, add[1:]
		}
		for len(drop) > 0 && drop[0] < p {
			drop = drop[1:]
		}
		start := pos
		pos += n + 1
		if (len(drop) > 0 && drop[0] == p) || (len(add) > 0 && add[0] == p) {
			buf = append(buf, body[run:start]...)
			run = pos // add's line, if any, goes in before the next one
			continue
		}
		kept++
	}
	buf = append(buf, body[run:]...)
	for _, p := range add {
		buf = appendLine(buf, p, entries[p])
	}
	return sumShard(buf, head), kept, true
}

// linePath is the path of one entry line as encode writes it; valid is
// false for a line parseFingerprints skips or reads otherwise.
func linePath(line string) (_ string, valid bool) {
	sha, tail, ok1 := strings.Cut(line, "\t")
	fp, path, ok2 := strings.Cut(tail, "\t")
	if !ok1 || !ok2 || sha == "" || fp == "" || path == "" || strings.HasSuffix(line, "\r") {
		return "", false
	}
	return path, true
}

// appendLine appends path's entry line.
func appendLine(buf []byte, path string, k known) []byte {
	return append(append(append(append(append(append(buf, k.sha256...), '\t'), k.fingerprint...), '\t'), path...), '\n')
}

// sumShard fills the head of a shard whose entry lines follow head bytes
// of room: the header and the sum of the lines.
func sumShard(buf []byte, head int) []byte {
	sum := sha256.Sum256(buf[head:])
	line := append(append([]byte(fingerprintsHeader+"\n"), fingerprintsSum...), hex.EncodeToString(sum[:])...)
	copy(buf, append(line, '\n'))
	return buf
}

// encode renders one shard holding paths (managed ones, of that shard)
// with their entries.
func (f *fingerprints) encode(paths []string, entries map[string]known) []byte {
	if !sort.StringsAreSorted(paths) {
		sort.Strings(paths)
	}

	// Sized once and appended to piece by piece: a line each was a
	// concatenation (and a garbage string) per entry.
	ks := make([]known, len(paths))
	head := len(fingerprintsHeader) + 1 + len(fingerprintsSum) + 2*sha256.Size + 1
	size := head
	for i, p := range paths {
		ks[i] = entries[p]
		size += len(ks[i].sha256) + len(ks[i].fingerprint) + len(p) + 3
	}
	buf := make([]byte, head, size)
	for i, p := range paths {
		buf = appendLine(buf, p, ks[i])
	}
	return sumShard(buf, head)
}

// saveFingerprints writes the changed shards back. The index is advisory:
// a failure costs hashing later, no more. So the shards are not flushed
// one by one (a first publication writes all of them): a crash that loses
// or tears one costs the same hashing, and an entry vouches only for the
// exact version it names.
func (e *Engine) saveFingerprints(ctx context.Context, root storage.Backend, l lease.Lease, f *fingerprints, cat recorded) {
	if cat == nil || l.Err() != nil {
		return
	}
	if shards := FingerprintShards(cat.count()); shards != f.shards {
		if err := e.relayout(ctx, root, f, shards); err != nil {
			e.Log.Warn().Err(err).Str("root", root.String()).Msg("could not read the fingerprint index to resize it; the next publication hashes the outputs it keeps")
			return
		}
	}
	if len(f.dirty) == 0 {
		return
	}
	byShard, drops := f.managedByShard(cat), f.dropsByShard(cat)
	shards := make([]string, 0, len(f.dirty))
	for sh := range f.dirty {
		shards = append(shards, sh)
	}
	sort.Strings(shards)

	// At once, like the outputs: on S3 a shard is a request. A shard
	// carries its sum, so the backend may rewrite it in place (no new
	// file and no rename on a local disk: there those cost more CPU than
	// anything else in a small publication).
	err := e.forEach(ctx, len(shards), func(ctx context.Context, i int) error {
		data, err := f.encodeShard(ctx, root, shards[i], byShard[shards[i]], drops, cat)
		if err != nil {
			return err
		}
		_, err = root.Put(ctx, shards[i], bytes.NewReader(data), int64(len(data)), storage.PutOptions{ContentType: "text/plain", DeferSync: true, InPlace: true})
		return err
	})
	if err != nil {
		e.Log.Warn().Err(err).Str("root", root.String()).Msg("could not save output fingerprints; the next publication hashes the outputs it keeps")
		return
	}
	f.dirty = map[string]bool{}
	if len(f.retired) > 0 {
		if err := root.Delete(ctx, f.retired...); err != nil {
			e.Log.Debug().Err(err).Str("root", root.String()).Msg("could not remove the fingerprint shards of the previous layout")
		}
		f.retired = nil
	}
}

// managedByShard returns the loaded entries of the dirty shards that the
// catalog records (only those are kept), by shard.
func (f *fingerprints) managedByShard(cat recorded) map[string][]string {
	byShard := make(map[string][]string, len(f.dirty))
	add := func(p string) {
		if sh := FingerprintsFile(p, f.shards); f.dirty[sh] {
			byShard[sh] = append(byShard[sh], p)
		}
	}
	if cat.count() <= 4*len(f.entries) {
		// A catalog about the index's size is walked in path order: each
		// shard's paths come sorted, no search in the catalog.
		cat.walk(func(p string) {
			if _, ok := f.entries[p]; ok {
				add(p)
			}
		})
		return byShard
	}
	for p := range f.entries {
		if cat.has(p) {
			add(p)
		}
	}
	return byShard
}

// dropsByShard returns, for the dirty shards left partial, the paths
// (sorted) whose stored lines a rewrite drops: those of the entries
// loaded (rendered again where managed) and those the catalog read
// recorded and cat does not. Nil when cat does not know the latter.
func (f *fingerprints) dropsByShard(cat recorded) map[string][]string {
	if len(f.partial) == 0 {
		return nil // none spliced
	}
	removed, exact := cat.removed()
	if !exact {
		return nil
	}
	out := map[string][]string{}
	add := func(p string) {
		if sh := FingerprintsFile(p, f.shards); f.dirty[sh] && f.partial[sh] {
			out[sh] = append(out[sh], p)
		}
	}
	for p := range f.entries {
		add(p)
	}
	for _, p := range removed {
		add(p)
	}
	for sh, ps := range out {
		slices.Sort(ps)
		out[sh] = slices.Compact(ps)
	}
	return out
}

// allShards names every shard file of an index of the given size.
func allShards(shards int) []string {
	out := make([]string, shards)
	for n := range uint32(shards) {
		out[n] = shardFile(n, shards)
	}
	return out
}

// loaded reports whether shard sh was read (whether or not it existed).
func loaded(f *fingerprints, sh string) bool {
	_, ok := f.loaded[sh]
	return ok
}

// relayout moves the index to a layout of the given number of shards (the
// root's catalog grew or shrank past a size): the entries of the shards
// not read yet are read first, so that none is lost, and every shard of
// the new layout that holds an entry is written.
func (e *Engine) relayout(ctx context.Context, root storage.Backend, f *fingerprints, shards int) error {
	var unread []string
	for n := range uint32(f.shards) {
		if sh := shardFile(n, f.shards); !loaded(f, sh) || f.partial[sh] {
			unread = append(unread, sh)
		}
	}
	if err := e.loadShards(ctx, root, f, unread, true); err != nil {
		return err
	}
	f.retired = nil
	for sh, found := range f.loaded {
		if found {
			f.retired = append(f.retired, sh)
		}
	}
	f.shards = shards
	f.loaded, f.dirty, f.partial = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for p := range f.entries {
		f.dirty[FingerprintsFile(p, shards)] = true
	}
	return nil
}

// checkKept finds the outputs a plan would keep in place whose bytes are
// not vouched for, checks them, and returns the ones that differ from their
// catalog record (to be marked damaged in stored, so the planner rewrites
// them). The ones that match are recorded in f. It only reads stored: the
// planner may read it meanwhile.
func (e *Engine) checkKept(ctx context.Context, root storage.Backend, cat *catalog.Catalog, desired []Output, stored map[string]planner.Stored, f *fingerprints) ([]string, error) {
	if cat == nil {
		return nil, nil
	}
	find := cat.Ascending() // a manifest lists its paths sorted

	// The kept outputs by path and recorded digest (equal to the desired
	// one): records are large, and a republish keeps most of them.
	var paths, sums []string
	for _, d := range desired {
		rec, managed := find(d.Path)
		s, exists := stored[d.Path]
		if !managed || !exists || s.Size != rec.Size || rec.SHA256 != d.SHA256 || s.Fingerprint == "" {
			continue // rewritten anyway, or nothing to tell versions apart
		}
		paths, sums = append(paths, d.Path), append(sums, d.SHA256)
	}
	if len(paths) == 0 {
		return nil, nil
	}
	if err := e.loadFingerprints(ctx, root, f, paths, false); err != nil {
		return nil, err
	}
	var suspects []catalog.Output
	var lookup func(string) (catalog.Output, bool)
	for i, p := range paths {
		if !f.vouches(p, stored[p], sums[i]) {
			if lookup == nil {
				lookup = cat.Finder()
			}
			rec, _ := lookup(p)
			suspects = append(suspects, rec)
		}
	}
	if len(suspects) == 0 {
		return nil, nil
	}
	matches := make([]bool, len(suspects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.workers())
	for i, rec := range suspects {
		g.Go(func() error {
			ok, err := landed(gctx, root, rec)
			matches[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var damaged []string
	for i, rec := range suspects {
		if matches[i] {
			f.set(rec.Path, known{fingerprint: stored[rec.Path].Fingerprint, sha256: rec.SHA256})
			continue
		}
		damaged = append(damaged, rec.Path)
	}
	if len(damaged) > 0 {
		e.Log.Warn().Str("root", root.String()).Int("outputs", len(damaged)).
			Msg("stored bytes differ from the catalog (a stale writer or a hand edit); this publication rewrites them")
	}
	return damaged, nil
}
