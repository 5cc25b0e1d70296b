package catalog

import (
	"bytes"
	"io"
	"time"
)

// Tally is what a summary of a catalog needs of one record: its owner,
// source version, size and last update. Its strings point into
// ScanTally's buffer and hold only until the callback returns.
type Tally struct {
	Owner     Owner
	Source    Source
	Size      int64
	UpdatedAt time.Time
}

// ScanTally reads a catalog as Scan does, one record at a time in path
// order from r, holding one record and a read buffer, and gives fn each
// record's Tally. It checks the document's form (Marshal's), the path
// order and the values it gives as Validate does, but not the values it
// skips (the path's rules, sha256, kind, source_path, transform,
// created_at, url): checking those costs a third of a Scan, and a summary
// shows none of them. A document Scan does not stream ends it with
// ErrNotStreamed as well; fn's error ends it and is returned.
func ScanTally(r io.Reader, fn func(*Tally) error) (Head, error) {
	s := &streamScan{r: r, check: true, times: map[string]canonTime{}}
	h, err := s.head()
	if err != nil {
		return Head{}, err
	}
	var rec Record
	var t Tally
	var prev, lastDigest []byte
	for n := 0; ; n++ {
		lead := "\n    "
		if n > 0 {
			lead = ",\n    "
		}
		last, err := s.endOrNext(lead, n == 0)
		if err != nil || last {
			return h, err
		}
		end, err := s.recordEnd()
		if err != nil || end < 0 {
			return Head{}, errOr(err, "a record cut short")
		}
		rec.Raw = s.buf[s.i:end]
		if !s.tallyRecord(&rec) {
			return Head{}, errNotStreamed("a record in another form")
		}
		o := &rec.Output
		if n > 0 && string(prev) >= o.Path {
			return Head{}, errNotStreamed("records out of path order")
		}
		if string(lastDigest) != o.Source.Digest && !ValidDigest(o.Source.Digest) || !validTally(o) {
			return Head{}, errNotStreamed("an invalid record")
		}
		prev, lastDigest = append(prev[:0], o.Path...), append(lastDigest[:0], o.Source.Digest...)
		t = Tally{Owner: o.Owner(), Source: o.Source, Size: o.Size, UpdatedAt: o.UpdatedAt}
		if err := fn(&t); err != nil {
			return Head{}, err
		}
		s.i = end
	}
}

// recordEnd is upTo("\n    }"): the offset in the window of the end of
// the record at the read position, -1 when r ends first. It looks for
// the brace, which a record holds twice, rather than the newline, which
// it holds a score of times.
func (s *streamScan) recordEnd() (int, error) {
	from := 0 // from the read position
	for {
		w := s.buf[s.i:]
		for {
			j := bytes.IndexByte(w[from:], '}')
			if j < 0 {
				break
			}
			k := from + j
			if k >= 5 && string(w[k-5:k]) == "\n    " {
				return s.i + k + 1, nil
			}
			from = k + 1
		}
		from = len(w)
		more, err := s.fill()
		if err != nil || !more {
			return -1, err
		}
	}
}

// tallyRecord reads rec.Raw into rec.Output, its strings pointing into
// the buffer: by the template scan, or, for a record with escaped
// strings, as Scan reads it.
func (s *streamScan) tallyRecord(rec *Record) bool {
	rec.Output = Output{}
	c := canonScan{d: rec.Raw, own: true, times: s.times}
	if c.record(&rec.Output) && c.i == len(c.d) {
		return true
	}
	return s.record(rec)
}

// validTally checks the values a Tally gives as Validate does, but for
// the source's digest (the caller checks it once per run of records that
// share it) and UTF-8 (a record read is valid UTF-8, or not in Marshal's
// form).
func validTally(o *Output) bool {
	return o.PipelineID != "" && o.DestinationID != "" && o.Source.ID != "" &&
		!o.Source.Created.IsZero() && o.Size >= 0 && !o.UpdatedAt.IsZero() &&
		writableTimes(o.Source.Created, o.UpdatedAt) == nil
}
