package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// A sparse layout is what a reader that keeps few records (a maintenance
// command: prune, reconcile-state) notes of a large catalog for Merge:
// not each record's path and offset but runs of records of about
// sparseRunBytes each, each run's place in the document, how many records
// it holds and its first path. It grows with the document by a run, not
// by a record: a million records (half a gigabyte) in a few thousand
// runs. Merge copies each run with no record dropped or placed by next
// among its paths as bytes, and reads the others again record by record.

// sparseRunBytes is about how many bytes a run of a sparse layout spans:
// what Merge reads again for a record it changes there.
const sparseRunBytes = 64 << 10

// recordRun is one run of records of a sparse layout.
type recordRun struct {
	first      string // its first record's path
	at         int    // its first record's index
	start, end int64  // its bytes: from its first record's "{" to its last's "}"
}

// NewSparseLayout is a sparse layout: runs of records, not each record.
// Of its records it tells Len and Near; Path and Has it cannot.
func NewSparseLayout() *Layout { return newSparseLayout(sparseRunBytes) }

func newSparseLayout(runBytes int64) *Layout { return &Layout{runBytes: runBytes} }

// addToRun is Add of a sparse layout: rec ends the last run, or starts a
// new one once that spans runBytes.
func (l *Layout) addToRun(rec *Record) {
	if k := len(l.runs); k == 0 || l.runs[k-1].end-l.runs[k-1].start >= l.runBytes {
		l.runs = append(l.runs, recordRun{first: strings.Clone(rec.Output.Path), at: l.n, start: rec.Offset})
	}
	l.end = rec.Offset + int64(len(rec.Raw))
	l.runs[len(l.runs)-1].end = l.end
	l.n++
	l.last = append(l.last[:0], rec.Output.Path...)
}

// joinRuns is join of sparse layouts: next's runs follow.
func (l *Layout) joinRuns(next *Layout) {
	for _, r := range next.runs {
		r.at += l.n
		l.runs = append(l.runs, r)
	}
	l.n += next.n
	if next.n > 0 {
		l.end = next.end
		l.last = append(l.last[:0], next.last...)
	}
}

// firstPath and lastPath are the paths of the layout's first and last
// records ("" when it has none).
func (l *Layout) firstPath() string {
	switch {
	case l.Len() == 0:
		return ""
	case l.runBytes > 0:
		return l.runs[0].first
	}
	return l.Path(0)
}

func (l *Layout) lastPath() string {
	switch {
	case l.Len() == 0:
		return ""
	case l.runBytes > 0:
		return string(l.last)
	}
	return l.Path(l.Len() - 1)
}

// Near is a record's path at or before the i-th record's, in path order:
// the i-th's itself, or of a sparse layout the first path of the run that
// holds it. Paths Near gives for increasing i never decrease.
func (l *Layout) Near(i int) string {
	if l.runBytes == 0 {
		return l.Path(i)
	}
	k := sort.Search(len(l.runs), func(k int) bool { return l.runs[k].at > i }) - 1
	return l.runs[k].first
}

// runBound is the path before which the records of run k lie: the next
// run's first ("" after the last run).
func (l *Layout) runBound(k int) string {
	if k+1 < len(l.runs) {
		return l.runs[k+1].first
	}
	return ""
}

// runLen is how many records run k holds.
func (l *Layout) runLen(k int) int {
	if k+1 < len(l.runs) {
		return l.runs[k+1].at - l.runs[k].at
	}
	return l.n - l.runs[k].at
}

// before reports whether p sorts before bound ("": no bound).
func before(p, bound string) bool { return bound == "" || p < bound }

// mergeRuns is Merge's copy of old's records by a sparse layout: the
// runs among whose paths no record is dropped (dropped, sorted) or
// placed by next are copied as bytes, together; each other run is read
// again and its records kept, dropped or placed beside next's one by one.
func (m *merger) mergeRuns(src *oldDoc, lay *Layout, dropped []string) error {
	for i := 0; i < len(lay.runs); {
		first := lay.runs[i].first
		if err := m.nextBefore(first); err != nil {
			return err
		}
		for len(dropped) > 0 && dropped[0] < first {
			dropped = dropped[1:] // no record is there
		}
		k := i
		for k < len(lay.runs) && !m.touches(dropped, lay.runBound(k)) {
			k++
		}
		if k == i {
			if err := m.rereadRun(src, lay, i, &dropped); err != nil {
				return err
			}
			i++
			continue
		}
		n := lay.runs[k-1].at - lay.runs[i].at + lay.runLen(k-1)
		if err := m.copyBytes(src, lay.runs[i].start, lay.runs[k-1].end, n); err != nil {
			return err
		}
		// What follows sorts after every record copied: no path repeats one.
		m.prev = m.prev[:0]
		if err := m.flush(mergeChunk); err != nil {
			return err
		}
		i = k
	}
	return nil
}

// touches reports whether a path dropped (sorted) or one of next's left
// lies before bound: in the run that bound ends.
func (m *merger) touches(dropped []string, bound string) bool {
	return len(dropped) > 0 && before(dropped[0], bound) || len(m.outs) > 0 && before(m.outs[0].Path, bound)
}

// rereadRun reads run k of old again and merges its records one by one:
// those at a path dropped (sorted, from the run's first path on) are
// left out, next's are placed among the others. It checks that the run's
// bytes hold the records the layout says: a layout not of these bytes
// fails, not merges.
func (m *merger) rereadRun(src *oldDoc, lay *Layout, k int, dropped *[]string) error {
	r, bound := lay.runs[k], lay.runBound(k)
	data, err := src.read(r.start, r.end, &m.run)
	if err != nil {
		return err
	}
	n, last := 0, "" // the records read, and the last one's path (in data)
	var bad error    // the bytes are not of the layout
	if m.times == nil {
		m.times = map[string]canonTime{}
	}
	err = readRun(data, r.start, m.times, func(rec *Record) error {
		p := rec.Output.Path
		if n == 0 && p != r.first || n > 0 && p <= last || !before(p, bound) {
			bad = fmt.Errorf("a record at %q", p)
			return bad
		}
		n, last = n+1, p
		if err := m.nextBefore(p); err != nil {
			return err
		}
		for len(*dropped) > 0 && (*dropped)[0] < p {
			*dropped = (*dropped)[1:]
		}
		if len(*dropped) > 0 && (*dropped)[0] == p {
			*dropped = (*dropped)[1:]
			return nil
		}
		return m.add(rec.Raw, p)
	})
	switch {
	case err == nil && n != lay.runLen(k):
		bad = fmt.Errorf("%d records, not %d", n, lay.runLen(k))
	case errors.Is(err, ErrNotStreamed):
		bad = err
	case err != nil && !errors.Is(err, bad):
		return err
	}
	if bad != nil {
		return fmt.Errorf("the catalog merged holds other records at bytes %d to %d than it was read with: %w", r.start, r.end, bad)
	}
	return nil
}

// readRun reads data, records one after another as Marshal writes them
// (recordSep between two), starting at the document's offset base, into
// fn (times: the times read so far); fn's error ends the read and is
// returned.
func readRun(data []byte, base int64, times map[string]canonTime, fn func(*Record) error) error {
	s := &streamScan{buf: data, base: base, eof: true, times: times}
	var rec Record
	for {
		if err := s.next(&rec); err != nil {
			return err
		}
		rec.Offset = s.base + int64(s.i)
		if err := fn(&rec); err != nil {
			return err
		}
		s.i += len(rec.Raw)
		if s.i == len(s.buf) {
			return nil
		}
		if !bytes.HasPrefix(s.buf[s.i:], []byte(recordSep)) {
			return errNotStreamed("records not one after another")
		}
		s.i += len(recordSep)
	}
}

// read reads old's bytes from offset start to end into buf (reused), and
// returns them.
func (o *oldDoc) read(start, end int64, buf *[]byte) ([]byte, error) {
	if err := o.skipTo(start); err != nil {
		return nil, err
	}
	if int64(cap(*buf)) < end-start {
		*buf = make([]byte, end-start)
	}
	data := (*buf)[:end-start]
	n, err := io.ReadFull(o.r, data)
	o.pos += int64(n)
	if err != nil {
		return nil, o.short(err, end)
	}
	return data, nil
}
