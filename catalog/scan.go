package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/distributor/distributor/internal/jsonfast"
)

// ErrNotStreamed marks a document Scan does not read record by record:
// one in another form than Marshal's (other whitespace, key order or
// escapes), with records out of path order, an invalid one, or no v4
// catalog at all. Parse reads such a document whole and decides (its
// answer, and its message, are the reference).
var ErrNotStreamed = errors.New("catalog is not in the form read as a stream")

// Head is a catalog's own fields: everything but its records.
type Head struct {
	DistributorVersion string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Record is one record as Scan reads it: its values and its bytes ("{" to
// "}"). Both point into Scan's buffer and hold only until the callback
// returns; Keep copies the values.
type Record struct {
	Output Output
	Raw    []byte

	// Offset is where Raw starts in the document.
	Offset int64

	// held: the document was read whole and its bytes stay as they are,
	// so the record holds as long as the caller keeps it.
	held bool
}

// Keep returns the record's values with strings of their own (a Keeper
// keeps many at less cost).
func (r *Record) Keep() Output {
	o := r.Output
	if r.held {
		return o
	}
	for _, s := range []*string{&o.Path, &o.PipelineID, &o.DestinationID, &o.Source.ID, &o.Source.Digest,
		&o.Kind, &o.SourcePath, &o.Transform, &o.SHA256, &o.URL} {
		*s = strings.Clone(*s)
	}
	return o
}

// Keeper keeps records (Record.Keep) by copying each one's bytes into
// blocks of its own, its strings then pointing there: one copy a record,
// not one a string (a republish keeps most records of its root).
type Keeper struct {
	block []byte
}

// keeperBlock is the size of a Keeper's blocks.
const keeperBlock = 1 << 20

// Keep is Record.Keep; a record of a document read whole is kept as it
// is (its bytes stay).
func (k *Keeper) Keep(r *Record) Output {
	o := r.Output
	if r.held {
		return o
	}
	if len(k.block)+len(r.Raw) > cap(k.block) {
		k.block = make([]byte, 0, max(keeperBlock, len(r.Raw)))
	}
	base := len(k.block)
	k.block = append(k.block, r.Raw...)
	for _, s := range []*string{&o.Path, &o.PipelineID, &o.DestinationID, &o.Source.ID, &o.Source.Digest,
		&o.Kind, &o.SourcePath, &o.Transform, &o.SHA256, &o.URL} {
		if len(*s) == 0 {
			continue
		}
		// A string read where it lies in Raw (no escape) moves with it;
		// one decoded elsewhere is copied.
		off := int(uintptr(unsafe.Pointer(unsafe.StringData(*s))) - uintptr(unsafe.Pointer(unsafe.SliceData(r.Raw))))
		if off >= 0 && off+len(*s) <= len(r.Raw) {
			*s = unsafe.String(&k.block[base+off], len(*s))
		} else {
			*s = strings.Clone(*s)
		}
	}
	return o
}

// Scan reads a catalog written in Marshal's form from r, one record at a
// time in path order, and returns its head. It holds one record and a
// read buffer, never the whole document: a catalog of a million records
// is half a gigabyte. A document of up to HoldMax bytes (size: r's length
// where known, else -1) is read whole first: records pointing into it
// are then kept without a copy (Keeper). fn's error ends the scan and is
// returned. Any other document ends it with ErrNotStreamed, possibly
// after some records: the caller drops what it gathered and reads the
// document with Parse.
//
// What Scan reads, Parse reads as the same catalog.
func Scan(r io.Reader, size int64, fn func(*Record) error) (Head, error) {
	s := &streamScan{r: r, check: true}
	if size >= 0 && size <= HoldMax {
		if err := s.readWhole(size); err != nil {
			return Head{}, err
		}
	}
	return s.run(fn)
}

// HoldMax is the size up to which Scan reads a document whole: a small
// root's records are then kept where they were read, as a parse keeps
// them.
const HoldMax = 16 << 20

// readWhole reads r to its end into the window, which then never moves.
func (s *streamScan) readWhole(size int64) error {
	s.buf = make([]byte, 0, size+1) // +1: the read that meets the end
	for {
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, 0)[:len(s.buf)]
		}
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err == io.EOF {
			s.eof, s.held = true, true
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// streamScan is one Scan: a window over r.
type streamScan struct {
	r    io.Reader
	buf  []byte
	i    int   // next byte to read in buf
	base int64 // the document's offset of buf[0]
	eof  bool
	// check validates each record; without it only a record's path is
	// read where it can be (Merge copies records Scan read and checked).
	check bool
	times map[string]canonTime
	enc   []byte // a record written again
	held  bool   // the window is the whole document (readWhole)
}

// scanReadSize is how much one read from r asks for; scanMaxWindow bounds
// the window a record or the head may need (a longer one is not streamed).
const (
	scanReadSize  = 256 << 10
	scanMaxWindow = 64 << 20
)

// errNotStreamed is ErrNotStreamed with what ended the scan.
func errNotStreamed(what string) error { return fmt.Errorf("%w: %s", ErrNotStreamed, what) }

// fill reads more of r into the window; false at r's end.
func (s *streamScan) fill() (bool, error) {
	if s.eof {
		return false, nil
	}
	if s.i > 0 {
		n := copy(s.buf, s.buf[s.i:])
		s.base += int64(s.i)
		s.buf, s.i = s.buf[:n], 0
	}
	if len(s.buf) >= scanMaxWindow {
		return false, errNotStreamed("a record longer than the window")
	}
	if cap(s.buf)-len(s.buf) < scanReadSize {
		nb := make([]byte, len(s.buf), 2*cap(s.buf)+scanReadSize)
		copy(nb, s.buf)
		s.buf = nb
	}
	n, err := io.ReadAtLeast(s.r, s.buf[len(s.buf):cap(s.buf)], 1)
	s.buf = s.buf[:len(s.buf)+n]
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		s.eof = true
		return n > 0, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// upTo returns the offset in the window of the end of the first sep from
// the read position, reading more as needed; -1 when r ends first.
func (s *streamScan) upTo(sep string) (int, error) {
	from := 0
	for {
		if j := bytes.Index(s.buf[s.i+from:], []byte(sep)); j >= 0 {
			return s.i + from + j + len(sep), nil
		}
		from = max(0, len(s.buf)-s.i-len(sep)+1)
		more, err := s.fill()
		if err != nil || !more {
			return -1, err
		}
	}
}

// CanonicalStart is how a v4 catalog in Marshal's form starts: a document
// that starts otherwise is none, or is read whole (Parse).
const CanonicalStart = "{\n  \"schema_version\": 4,\n  \""

// canonHeadEnd is how Marshal's head ends, before the first record.
const canonHeadEnd = ",\n  \"state\": {\n    \"mode\": \"" + ModeCatalog + "\"\n  },\n  \"outputs\": ["

// head reads the document up to its first record.
func (s *streamScan) head() (Head, error) {
	end, err := s.upTo(canonHeadEnd)
	if err != nil || end < 0 {
		return Head{}, errOr(err, "no catalog head in Marshal's form")
	}
	d := s.buf[s.i:end]
	c := canonScan{d: d, times: s.times}
	var h Head
	ok := c.lit(CanonicalStart)
	if ok && c.lit("distributor_version\": ") {
		// Read loosely (escapes), checked below by writing it again.
		to := bytes.Index(d[c.i:], []byte(",\n  \"created_at\": "))
		ok = to >= 0 && json.Unmarshal(d[c.i:c.i+to], &h.DistributorVersion) == nil && h.DistributorVersion != ""
		c.i += to + len(",\n  \"")
	}
	ok = ok && c.lit("created_at\": ") && c.time(&h.CreatedAt) &&
		c.lit(",\n  \"updated_at\": ") && c.time(&h.UpdatedAt)
	hc := Catalog{DistributorVersion: h.DistributorVersion, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	if !ok || !bytes.Equal(appendHead(nil, &hc), d) {
		return Head{}, errNotStreamed("a catalog head in another form")
	}
	if hc.validateHead() != nil {
		return Head{}, errNotStreamed("an invalid catalog head")
	}
	s.i = end
	return h, nil
}

func errOr(err error, what string) error {
	if err != nil {
		return err
	}
	return errNotStreamed(what)
}

// run reads the head, then each record into fn, then the end.
func (s *streamScan) run(fn func(*Record) error) (Head, error) {
	s.times = map[string]canonTime{}
	h, err := s.head()
	if err != nil {
		return Head{}, err
	}
	if err := s.records(0, true, fn); err != nil {
		return Head{}, err
	}
	return h, nil
}

// records reads each record from the read position into fn: from the
// document's first (n 0) or a later one, to the document's end (last),
// or, in a block of whole records (scanBlocks), to the window's end.
func (s *streamScan) records(n int, last bool, fn func(*Record) error) error {
	rec := Record{held: s.held}
	var prev []byte
	for first := n; ; n++ {
		if !last && n > first && s.i == len(s.buf) {
			return nil
		}
		lead := "\n    "
		if n > 0 {
			lead = ",\n    "
		}
		end, err := s.endOrNext(lead, n == 0)
		if err != nil || end {
			return err
		}
		if err := s.next(&rec); err != nil {
			return err
		}
		rec.Offset = s.base + int64(s.i)
		to := s.i + len(rec.Raw)
		if n > first && string(prev) >= rec.Output.Path {
			return errNotStreamed("records out of path order")
		}
		if s.check && rec.Output.Validate() != nil {
			return errNotStreamed("an invalid record")
		}
		prev = append(prev[:0], rec.Output.Path...)
		if err := fn(&rec); err != nil {
			return err
		}
		s.i = to
	}
}

// scanAhead is how much of the document the window holds before a record
// is read in Marshal's form, where it ends: more than almost any record.
const scanAhead = 16 << 10

// next reads the record at the read position into rec (not moving past
// it). A record in Marshal's form with no escape, whole in the window, is
// read where it is; any other is first delimited ("\n    }" ends it: no
// string holds a raw newline) and then read by record.
func (s *streamScan) next(rec *Record) error {
	for len(s.buf)-s.i < scanAhead && !s.eof {
		if _, err := s.fill(); err != nil {
			return err
		}
	}
	rec.Output = Output{}
	c := canonScan{d: s.buf[s.i:], own: true, times: s.times}
	if c.record(&rec.Output) {
		rec.Raw = c.d[:c.i]
		return nil
	}
	end, err := s.upTo("\n    }")
	if err != nil || end < 0 {
		return errOr(err, "a record cut short")
	}
	rec.Raw = s.buf[s.i:end]
	if !s.record(rec) {
		return errNotStreamed("a record in another form")
	}
	return nil
}

// record reads rec.Raw into rec.Output: by the template scan, or, for a
// record with escaped strings, by the generic reader and then checked by
// writing it again (Marshal's form, or not streamed).
func (s *streamScan) record(rec *Record) bool {
	rec.Output = Output{}
	c := canonScan{d: rec.Raw, own: true, times: s.times}
	if !s.check && c.lit("{\n      \"path\": ") && c.str(&rec.Output.Path) {
		return true
	}
	c.i = 0
	if c.record(&rec.Output) && c.i == len(c.d) {
		return true
	}
	o, ok := jsonfast.Run(rec.Raw, readOutput)
	if !ok {
		return false
	}
	var t timeCache
	s.enc = t.appendOutput(s.enc[:0], &o)
	rec.Output = o
	return bytes.Equal(s.enc, rec.Raw)
}

// endOrNext reads what follows the head or a record: the document's end
// (last), or lead before the next record.
func (s *streamScan) endOrNext(lead string, first bool) (last bool, _ error) {
	tail := "\n  ]\n}\n"
	if first {
		tail = "]\n}\n"
	}
	for len(s.buf)-s.i < max(len(tail), len(lead)) {
		more, err := s.fill()
		if err != nil {
			return false, err
		}
		if !more {
			break
		}
	}
	rest := s.buf[s.i:]
	switch {
	case bytes.HasPrefix(rest, []byte(lead)):
		s.i += len(lead)
		return false, nil
	case string(rest) == tail:
		s.i += len(tail)
		if more, err := s.fill(); err != nil || more {
			return false, errOr(err, "data after the catalog")
		}
		return true, nil
	}
	return false, errNotStreamed("a catalog in another form")
}
