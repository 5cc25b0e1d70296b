package catalog

import (
	"bytes"
	"hash/maphash"
	"sort"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/distributor/distributor/internal/jsonfast"
)

// origin is where the records of a catalog read by ParseOwned came from.
type origin struct {
	data  []byte
	seed  maphash.Seed
	spans []span // one per record, in path order

	// first and n name the slice of records read (in path order: an
	// origin is dropped when they were not).
	first *Output
	n     int
}

// span locates one record's object ("{" to "}") in origin.data; end is 0
// when its bytes are not what Marshal would write. hash is recordHash of
// the values read.
type span struct {
	path       string
	start, end int
	hash       uint64
}

// recordHash hashes every field Marshal writes, its strings by identity:
// where their bytes are and how many. A catalog read with ParseOwned has
// every string of a canonical record pointing into origin.data, which the
// origin keeps alive and nobody writes, so no other string can have the
// same bytes' address: equal hashes of a record and a span's record mean
// the same strings and equal other values, so equal bytes (a collision is a
// 2⁻⁶⁴ chance per changed record). A string replaced by an equal copy
// hashes differently and is merely encoded again. Hashing 27 words instead
// of the strings' contents cost a fifth of a read of 100,000 records.
func recordHash(seed maphash.Seed, o *Output) uint64 {
	var w [27]uint64
	for i, s := range [...]string{o.Path, o.PipelineID, o.DestinationID, o.Source.ID, o.Source.Digest,
		o.Kind, o.SourcePath, o.Transform, o.SHA256, o.URL} {
		if len(s) > 0 {
			w[2*i] = uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))
		}
		w[2*i+1] = uint64(len(s))
	}
	for i, t := range [...]time.Time{o.Source.Created, o.CreatedAt, o.UpdatedAt} {
		w[20+2*i], w[21+2*i] = uint64(t.Unix()), uint64(t.Nanosecond())
	}
	w[26] = uint64(o.Size)
	return maphash.Bytes(seed, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8))
}

// verbatim returns the bytes of o as read, when o holds exactly the values
// read at that path and they were written canonically. k is a cursor over
// the spans: Marshal asks in path order.
func (g *origin) verbatim(o *Output, k *int) ([]byte, bool) {
	if g == nil {
		return nil, false
	}
	for *k < len(g.spans) && g.spans[*k].path < o.Path {
		*k++
	}
	if *k >= len(g.spans) {
		return nil, false
	}
	s := &g.spans[*k]
	if s.path != o.Path || s.end == 0 || recordHash(g.seed, o) != s.hash {
		return nil, false
	}
	return g.data[s.start:s.end], true
}

// cursor is the verbatim cursor for records from path on: the first span
// not before it.
func (g *origin) cursor(path string) int {
	if g == nil {
		return 0
	}
	return sort.Search(len(g.spans), func(i int) bool { return g.spans[i].path >= path })
}

// canonScan reads one record in Marshal's exact form.
type canonScan struct {
	d     []byte
	i     int
	own   bool // strings may point into d (ParseOwned)
	strs  map[string]string
	times map[string]canonTime
}

type canonTime struct {
	t     time.Time
	canon bool // parses, and Marshal writes it back the same
}

func (s *canonScan) lit(l string) bool {
	if len(s.d)-s.i < len(l) || string(s.d[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// raw reads a string Marshal writes back byte for byte: no escape, no
// control character, valid UTF-8 without U+2028 and U+2029 (written as
// escapes).
func (s *canonScan) raw() ([]byte, bool) {
	if s.i >= len(s.d) || s.d[s.i] != '"' {
		return nil, false
	}
	start, ascii := s.i+1, true
	for j := start + jsonfast.PlainPrefix(s.d[start:]); j < len(s.d); j++ {
		switch c := s.d[j]; {
		case c == '"':
			b := s.d[start:j]
			if !ascii && (!utf8.Valid(b) || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))) {
				return nil, false
			}
			s.i = j + 1
			return b, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (s *canonScan) str(dst *string) bool {
	b, ok := s.raw()
	if !ok {
		return false
	}
	switch {
	case len(b) == 0:
		*dst = ""
	case s.own:
		*dst = unsafe.String(&b[0], len(b))
	default:
		*dst = string(b)
	}
	return true
}

// intern reads a string that repeats across records (ids, kinds). With
// own it points into d like any other (no copy, and recordHash needs it).
func (s *canonScan) intern(dst *string) bool {
	if s.own {
		return s.str(dst)
	}
	b, ok := s.raw()
	if !ok {
		return false
	}
	if v, ok := s.strs[string(b)]; ok {
		*dst = v
		return true
	}
	*dst = string(b)
	if len(s.strs) < 1<<16 {
		s.strs[*dst] = *dst
	}
	return true
}

func (s *canonScan) time(dst *time.Time) bool {
	b, ok := s.raw()
	if !ok {
		return false
	}
	ct, ok := s.times[string(b)]
	if !ok {
		t, err := parseTime("", string(b))
		ct = canonTime{t: t, canon: err == nil && FormatTime(t) == string(b)}
		if len(s.times) < 1<<16 {
			s.times[string(b)] = ct
		}
	}
	*dst = ct.t
	return ct.canon
}

// int reads a size as Marshal writes it: digits, no sign, no leading zero.
func (s *canonScan) int(dst *int64) bool {
	start := s.i
	var v int64
	for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
		if v > (1<<63-1-9)/10 {
			return false // near overflow: the generic reader decides
		}
		v = v*10 + int64(s.d[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || n > 1 && s.d[start] == '0' {
		return false
	}
	*dst = v
	return true
}

// record reads one canonical record starting at "{"; ok is false when the
// bytes are in any other form (the generic reader then reads them).
func (s *canonScan) record(o *Output) bool {
	const f = ",\n      \""
	ok := s.lit("{\n      \"path\": ") && s.str(&o.Path) &&
		s.lit(f+"pipeline_id\": ") && s.intern(&o.PipelineID) &&
		s.lit(f+"destination_id\": ") && s.intern(&o.DestinationID) &&
		s.lit(f+"source\": {\n        \"id\": ") && s.intern(&o.Source.ID) &&
		s.lit(",\n        \"digest\": ") && s.intern(&o.Source.Digest) &&
		s.lit(",\n        \"created\": ") && s.time(&o.Source.Created) &&
		s.lit("\n      }"+f+"kind\": ") && s.intern(&o.Kind)
	if !ok {
		return false
	}
	if s.lit(f+"source_path\": ") && (!s.str(&o.SourcePath) || o.SourcePath == "") {
		return false
	}
	if s.lit(f+"transform\": ") && (!s.intern(&o.Transform) || o.Transform == "") {
		return false
	}
	ok = s.lit(f+"sha256\": ") && s.str(&o.SHA256) &&
		s.lit(f+"size\": ") && s.int(&o.Size) &&
		s.lit(f+"created_at\": ") && s.time(&o.CreatedAt) &&
		s.lit(f+"updated_at\": ") && s.time(&o.UpdatedAt)
	if !ok {
		return false
	}
	if s.lit(f+"url\": ") && (!s.str(&o.URL) || o.URL == "") {
		return false
	}
	return s.lit("\n    }")
}
