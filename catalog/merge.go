package catalog

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Layout is where the records of a document lie, as Scan read them
// (Add each Record in turn): every record's path, in path order, and its
// offset. Merge copies the records it keeps by their offsets, as runs of
// bytes, without reading them again record by record. A sparse layout
// (NewSparseLayout) notes runs of records instead, not each record.
type Layout struct {
	block []byte // the paths, one after another
	ends  []int  // where each path ends in block
	offs  []int64
	end   int64 // where the last record ends

	// index finds a path for Has without a search, made at its first
	// call (nil: Has searches).
	index *pathIndex

	// runs, in a sparse layout (runBytes > 0), take the place of the
	// paths and offsets: n records in runs of about runBytes bytes,
	// last the last record's path.
	runs     []recordRun
	runBytes int64
	n        int
	last     []byte
}

// NewLayout is a Layout with room for the records of a document of about
// size bytes.
func NewLayout(size int64) *Layout {
	hint := max(0, min(size, 1<<34))
	n := MaxRecords(int(hint)) / 2
	return &Layout{block: make([]byte, 0, hint/16), ends: make([]int, 0, n), offs: make([]int64, 0, n), index: &pathIndex{}}
}

// Add records rec, the next record Scan read.
func (l *Layout) Add(rec *Record) {
	if l.runBytes > 0 {
		l.addToRun(rec)
		return
	}
	l.block = append(l.block, rec.Output.Path...)
	l.ends = append(l.ends, len(l.block))
	l.offs = append(l.offs, rec.Offset)
	l.end = rec.Offset + int64(len(rec.Raw))
}

// join appends the layout of the records that follow (read in a block of
// their own).
func (l *Layout) join(next *Layout) {
	if l.runBytes > 0 {
		l.joinRuns(next)
		return
	}
	base := len(l.block)
	l.block = append(l.block, next.block...)
	for _, e := range next.ends {
		l.ends = append(l.ends, base+e)
	}
	l.offs = append(l.offs, next.offs...)
	if next.Len() > 0 {
		l.end = next.end
	}
}

// reset empties the layout, keeping its room.
func (l Layout) reset() Layout {
	return Layout{block: l.block[:0], ends: l.ends[:0], offs: l.offs[:0], runs: l.runs[:0], runBytes: l.runBytes, last: l.last[:0]}
}

// Len is how many records the layout holds.
func (l *Layout) Len() int {
	if l.runBytes > 0 {
		return l.n
	}
	return len(l.ends)
}

// Path is the i-th record's path; it points into the layout, which no one
// changes once the document is read. A sparse layout has none (Near).
func (l *Layout) Path(i int) string {
	if l.runBytes > 0 {
		panic("catalog: Path of a sparse layout")
	}
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	if start == l.ends[i] {
		return ""
	}
	return unsafe.String(&l.block[start], l.ends[i]-start)
}

// Has reports whether a record is at p. It is asked once the layout is
// complete, from any number of goroutines. A layout asked about more
// paths than an eighth of its records answers the rest from a hash table
// made then (a root's million paths each searched in a million cost a
// second; the table costs a tenth of that to make, more than the
// searches of a few thousand). A sparse layout cannot tell.
func (l *Layout) Has(p string) bool {
	if l.runBytes > 0 {
		panic("catalog: Has of a sparse layout")
	}
	if l.index == nil || l.index.asked.Add(1) <= int64(l.Len()/8) {
		i := l.search(p)
		return i < l.Len() && l.Path(i) == p
	}
	return l.index.has(l, p)
}

// pathIndex is a layout's paths in an open-addressing table: each slot
// holds a record's index plus one (0: empty) under the high half of its
// path's hash, so that a probe compares only the paths whose hashes
// agree.
type pathIndex struct {
	asked atomic.Int64 // calls of Has
	once  sync.Once
	seed  maphash.Seed
	slots []uint64
}

func (x *pathIndex) has(l *Layout, p string) bool {
	x.once.Do(func() { x.build(l) })
	h := maphash.String(x.seed, p)
	tag, mask := h>>32<<32, uint64(len(x.slots)-1)
	for i := h & mask; x.slots[i] != 0; i = (i + 1) & mask {
		if s := x.slots[i]; s&^(1<<32-1) == tag && l.Path(int(uint32(s)-1)) == p {
			return true
		}
	}
	return false
}

// build fills the table, at most half full.
func (x *pathIndex) build(l *Layout) {
	n := 1
	for n < 2*l.Len() {
		n *= 2
	}
	x.seed, x.slots = maphash.MakeSeed(), make([]uint64, n)
	mask := uint64(n - 1)
	for r := range l.Len() {
		h := maphash.String(x.seed, l.Path(r))
		i := h & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = h>>32<<32 | uint64(r+1)
	}
}

// search is the index of the first record at or after p.
func (l *Layout) search(p string) int {
	return sort.Search(l.Len(), func(i int) bool { return l.Path(i) >= p })
}

// span is where the i-th record's bytes lie.
func (l *Layout) span(i int) (start, end int64) {
	if i+1 < l.Len() {
		return l.offs[i], l.offs[i+1] - int64(len(recordSep))
	}
	return l.offs[i], l.end
}

// recordSep is what lies between two records in Marshal's form.
const recordSep = ",\n    "

// Merge writes to w, exactly as Marshal would write the whole of it, the
// catalog that follows the one old holds: next's head, and old's records
// with those at the paths of dropped (sorted) left out and next's
// records in their places, in path order. old must be the bytes a Scan
// read into lay; the runs of records kept between those left out and
// next's are copied as they lie there, never parsed again nor held
// together (by a sparse layout, a run of records that holds one left out
// or next's is read again, record by record). old is read to its end. next's records are validated as
// Marshal does; one at the path of a record kept from old fails with
// ErrInvalid. On an error part of the document may have been written.
func Merge(w io.Writer, old io.Reader, lay *Layout, next *Catalog, dropped []string) error {
	cp := *next
	if !sorted(next.Outputs) {
		cp.Outputs = append([]Output(nil), next.Outputs...)
		cp.Sort()
	}
	if err := cp.validateHead(); err != nil {
		return err
	}
	m := merger{w: w, b: appendHead(make([]byte, 0, mergeChunk+64<<10), &cp), outs: cp.Outputs}
	src := oldDoc{r: old}
	merge := m.mergeRecords
	if lay.runBytes > 0 {
		merge = m.mergeRuns
	}
	if err := merge(&src, lay, dropped); err != nil {
		return err
	}
	if err := m.nextBefore(""); err != nil {
		return err
	}
	if err := src.skipToEnd(); err != nil {
		return err
	}
	if m.n == 0 {
		m.b = append(m.b, "]\n}\n"...)
	} else {
		m.b = append(m.b, "\n  ]\n}\n"...)
	}
	_, err := w.Write(m.b)
	return err
}

// mergeRecords is Merge's copy of old's records by a layout of each
// record: the runs of records kept between those dropped and next's are
// copied as bytes.
func (m *merger) mergeRecords(src *oldDoc, lay *Layout, dropped []string) error {
	drops := lay.indexes(dropped)
	for i := 0; i < lay.Len(); {
		if err := m.nextBefore(lay.Path(i)); err != nil {
			return err
		}
		if len(drops) > 0 && drops[0] == i {
			drops, i = drops[1:], i+1
			continue
		}
		k := lay.runEnd(i, drops, m.outs)
		if k == i {
			return fmt.Errorf("%w: outputs: duplicate path %q", ErrInvalid, lay.Path(i))
		}
		if err := m.copyRun(src, lay, i, k); err != nil {
			return err
		}
		i = k
	}
	return nil
}

// indexes is the sorted indexes of the records at paths (sorted); a path
// no record is at has none.
func (l *Layout) indexes(paths []string) []int {
	var out []int
	for _, p := range paths {
		if i := l.search(p); i < l.Len() && l.Path(i) == p {
			out = append(out, i)
		}
	}
	return out
}

// runEnd is the end of the run of records kept from i on: the next one
// left out (drops) or the next one a record of outs (sorted) goes before,
// or at. i itself when outs' first record is at its path.
func (l *Layout) runEnd(i int, drops []int, outs []Output) int {
	k := l.Len()
	if len(drops) > 0 {
		k = drops[0]
	}
	if len(outs) > 0 {
		k = min(k, l.search(outs[0].Path))
	}
	return k
}

// mergeChunk is how many bytes Merge reads and writes at a time.
const mergeChunk = 1 << 20

// oldDoc is Merge's read of the old document, in order.
type oldDoc struct {
	r   io.Reader
	pos int64 // bytes read
	buf []byte
}

// skipTo reads the bytes up to offset to, unused.
func (o *oldDoc) skipTo(to int64) error {
	if o.buf == nil {
		o.buf = make([]byte, 64<<10)
	}
	for o.pos < to {
		n, err := io.ReadFull(o.r, o.buf[:min(int64(len(o.buf)), to-o.pos)])
		o.pos += int64(n)
		if err != nil {
			return o.short(err, to)
		}
	}
	return nil
}

// skipToEnd reads the rest of the document, unused.
func (o *oldDoc) skipToEnd() error {
	if o.buf == nil {
		o.buf = make([]byte, 64<<10)
	}
	for {
		n, err := o.r.Read(o.buf)
		o.pos += int64(n)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// short is the error of a read that ended before offset to.
func (o *oldDoc) short(err error, to int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the catalog merged ends at byte %d, before its record ending at %d", o.pos, to)
	}
	return err
}

// merger is Merge's output: records appended in path order, written to
// w in mergeChunk pieces.
type merger struct {
	w    io.Writer
	b    []byte
	n    int      // records written
	outs []Output // next's records not yet written
	prev []byte
	t    timeCache
	enc  []byte
	run  []byte // a run of old's records read again (mergeRuns)
	// times are the times read in the runs read again.
	times map[string]canonTime
}

// nextBefore writes next's records that sort before p ("": all left).
func (m *merger) nextBefore(p string) error {
	for len(m.outs) > 0 && (p == "" || m.outs[0].Path < p) {
		o := &m.outs[0]
		if err := o.Validate(); err != nil {
			return fmt.Errorf("%w: outputs: %w", ErrInvalid, err)
		}
		m.enc = m.t.appendOutput(m.enc[:0], o)
		if err := m.add(m.enc, o.Path); err != nil {
			return err
		}
		m.outs = m.outs[1:]
	}
	return nil
}

// add appends one record's bytes.
func (m *merger) add(raw []byte, path string) error {
	if m.n > 0 && string(m.prev) == path {
		return fmt.Errorf("%w: outputs: duplicate path %q", ErrInvalid, path)
	}
	m.sep()
	m.b = append(m.b, raw...)
	m.n++
	m.prev = append(m.prev[:0], path...)
	return m.flush(mergeChunk)
}

// sep appends what goes before the next record.
func (m *merger) sep() {
	if m.n > 0 {
		m.b = append(m.b, ',')
	}
	m.b = append(m.b, "\n    "...)
}

// flush writes the bytes gathered once they are at least at.
func (m *merger) flush(at int) error {
	if len(m.b) < at {
		return nil
	}
	_, err := m.w.Write(m.b)
	m.b = m.b[:0]
	return err
}

// copyRun appends old's records i to k-1 (kept), read from src straight
// into the output as one run of bytes. It checks that the run starts and
// ends as a record does: a layout not of these bytes fails, not merges.
func (m *merger) copyRun(src *oldDoc, lay *Layout, i, k int) error {
	start, _ := lay.span(i)
	_, end := lay.span(k - 1)
	if err := m.copyBytes(src, start, end, k-i); err != nil {
		return err
	}
	m.prev = append(m.prev[:0], lay.Path(k-1)...)
	return m.flush(mergeChunk)
}

// copyBytes appends the records (how many) old holds from offset start
// to end, read from src straight into the output as one run of bytes,
// checking that the run starts and ends as a record does.
func (m *merger) copyBytes(src *oldDoc, start, end int64, records int) error {
	if err := src.skipTo(start); err != nil {
		return err
	}
	m.sep()
	first := len(m.b) // where the run starts in m.b, until checked
	for src.pos < end {
		if len(m.b) == cap(m.b) {
			if err := m.flush(0); err != nil {
				return err
			}
			first = min(first, 0)
		}
		room := m.b[len(m.b):cap(m.b)]
		n, err := io.ReadFull(src.r, room[:min(int64(len(room)), end-src.pos)])
		m.b = m.b[:len(m.b)+n]
		src.pos += int64(n)
		if err != nil {
			return src.short(err, end)
		}
		if first >= 0 {
			if m.b[first] != '{' {
				return fmt.Errorf("the catalog merged has no record at byte %d", start)
			}
			first = -1
		}
	}
	if len(m.b) == 0 || m.b[len(m.b)-1] != '}' {
		return fmt.Errorf("the catalog merged has no record ending at byte %d", end)
	}
	m.n += records
	return nil
}
