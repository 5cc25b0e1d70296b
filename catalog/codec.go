package catalog

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The codec's fast paths. Catalogs grow to a million records (half a
// gigabyte): encoding/json's reflection, its indent pass and one allocation
// per field made reading and writing them the bulk of a publication.
//
// parseFast reads the catalog form this package writes (and any key order
// or whitespace) and gives up on anything else: null, an unknown or
// differently cased key, a repeated key, a number that is not a plain
// integer, invalid UTF-8, a missing field. Parse then runs the strict
// encoding/json decoder, whose answer (and error message) is the reference.
// So whatever parseFast accepts, the reference decoder accepts the same way.

// internMax bounds the strings one parse interns: ids and times repeat across
// records, paths and digests do not.
const internMax = 1 << 16

type fastParser struct {
	data  []byte
	i     int
	strs  map[string]string
	times map[string]time.Time
}

// errFallback makes parseFast hand the input to the reference decoder.
type errFallback struct{}

func parseFast(data []byte) (c *Catalog, ok bool) {
	p := fastParser{data: data, strs: map[string]string{}, times: map[string]time.Time{}}
	defer func() {
		if r := recover(); r != nil {
			if _, fb := r.(errFallback); !fb {
				panic(r)
			}
			c, ok = nil, false
		}
	}()
	c = p.catalog()
	p.ws()
	if p.i != len(p.data) {
		return nil, false
	}
	if c.Validate() != nil {
		return nil, false
	}
	c.Sort()
	return c, true
}

func fallback() { panic(errFallback{}) }

func (p *fastParser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// expect consumes c after optional whitespace.
func (p *fastParser) expect(c byte) {
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != c {
		fallback()
	}
	p.i++
}

// peek returns the next non-space byte without consuming it.
func (p *fastParser) peek() byte {
	p.ws()
	if p.i >= len(p.data) {
		fallback()
	}
	return p.data[p.i]
}

// object calls field for every key; field must consume the value.
func (p *fastParser) object(field func(key []byte)) {
	p.expect('{')
	if p.peek() == '}' {
		p.i++
		return
	}
	for {
		key := p.rawString()
		p.expect(':')
		field(key)
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return
		default:
			fallback()
		}
	}
}

// rawString returns the bytes of a string with no escapes, valid UTF-8 and
// no control characters; anything else falls back (a string with escapes
// goes through str instead).
func (p *fastParser) rawString() []byte {
	p.expect('"')
	start := p.i
	ascii := true
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := p.data[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				fallback()
			}
			return s
		case c == '\\' || c < 0x20:
			fallback()
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	fallback()
	return nil
}

// str reads a string value; escaped strings are decoded by encoding/json so
// that their meaning is exactly the reference decoder's.
func (p *fastParser) str() string {
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		fallback()
	}
	start := p.i
	if b, ok := p.tryRaw(); ok {
		return string(b)
	}
	j := start + 1
	for ; j < len(p.data) && p.data[j] != '"'; j++ {
		switch c := p.data[j]; {
		case c == '\\':
			j++ // the escaped byte, a quote included
		case c < 0x20:
			fallback()
		}
	}
	if j >= len(p.data) {
		fallback()
	}
	p.i = j + 1
	raw := p.data[start:p.i]
	if !utf8.Valid(raw) {
		fallback() // encoding/json would replace the bytes: leave it to it
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		fallback()
	}
	return s
}

// nonEmpty reads a string that must not be empty (optional fields).
func (p *fastParser) nonEmpty() string {
	s := p.str()
	if s == "" {
		fallback()
	}
	return s
}

// intern reads a string and returns a shared copy of repeated values.
func (p *fastParser) intern() string {
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == '"' {
		start := p.i
		if b, ok := p.tryRaw(); ok {
			if s, ok := p.strs[string(b)]; ok {
				return s
			}
			s := string(b)
			if len(p.strs) < internMax {
				p.strs[s] = s
			}
			return s
		}
		p.i = start
	}
	return p.str()
}

// tryRaw is rawString that reports an escape instead of falling back.
func (p *fastParser) tryRaw() ([]byte, bool) {
	start := p.i + 1
	for j := start; j < len(p.data); j++ {
		switch c := p.data[j]; {
		case c == '"':
			s := p.data[start:j]
			if !utf8.Valid(s) {
				fallback()
			}
			p.i = j + 1
			return s, true
		case c == '\\':
			return nil, false
		case c < 0x20:
			fallback()
		}
	}
	fallback()
	return nil, false
}

// time reads an RFC 3339 time as parseTime does, remembering repeats.
func (p *fastParser) time() time.Time {
	p.ws()
	start := p.i
	b, ok := p.tryRaw()
	if !ok {
		p.i = start
		t, err := parseTime("", p.str())
		if err != nil {
			fallback()
		}
		return t
	}
	if t, ok := p.times[string(b)]; ok {
		return t
	}
	t, err := parseTime("", string(b))
	if err != nil {
		fallback()
	}
	if len(p.times) < internMax {
		p.times[string(b)] = t
	}
	return t
}

// int reads a JSON integer without fraction or exponent that fits int64.
func (p *fastParser) int() int64 {
	p.ws()
	start := p.i
	if p.i < len(p.data) && p.data[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || (n > 1 && p.data[digits] == '0') {
		fallback()
	}
	if p.i < len(p.data) {
		switch p.data[p.i] {
		case '.', 'e', 'E':
			fallback()
		}
	}
	v, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 64)
	if err != nil {
		fallback()
	}
	return v
}

func (p *fastParser) catalog() *Catalog {
	c := &Catalog{}
	var seen [6]bool
	once := func(i int) {
		if seen[i] {
			fallback()
		}
		seen[i] = true
	}
	p.object(func(key []byte) {
		switch string(key) {
		case "schema_version":
			once(0)
			if p.int() != SchemaVersion {
				fallback()
			}
		case "distributor_version":
			once(1)
			c.DistributorVersion = p.nonEmpty()
		case "created_at":
			once(2)
			c.CreatedAt = p.time()
		case "updated_at":
			once(3)
			c.UpdatedAt = p.time()
		case "state":
			once(4)
			mode := false
			p.object(func(key []byte) {
				if string(key) != "mode" || mode || p.str() != ModeCatalog {
					fallback()
				}
				mode = true
			})
			if !mode {
				fallback()
			}
		case "outputs":
			once(5)
			c.Outputs = p.outputs()
		default:
			fallback()
		}
	})
	if seen != [6]bool{true, seen[1], true, true, true, true} {
		fallback()
	}
	return c
}

func (p *fastParser) outputs() []Output {
	p.expect('[')
	// Records are about 500 bytes written: size the slice once.
	out := make([]Output, 0, min(len(p.data)/400+1, 1<<24))
	if p.peek() == ']' {
		p.i++
		return out
	}
	for {
		out = append(out, p.output())
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return out
		default:
			fallback()
		}
	}
}

// Bits of the fields one record has shown.
const (
	fPath = 1 << iota
	fPipeline
	fDestination
	fSource
	fKind
	fSourcePath
	fTransform
	fSHA256
	fSize
	fCreated
	fUpdated
	fURL
	fRequired = fPath | fPipeline | fDestination | fSource | fKind | fSHA256 | fSize | fCreated | fUpdated
)

func (p *fastParser) output() Output {
	var o Output
	var seen int
	once := func(bit int) {
		if seen&bit != 0 {
			fallback()
		}
		seen |= bit
	}
	p.object(func(key []byte) {
		switch string(key) {
		case "path":
			once(fPath)
			o.Path = p.str()
		case "pipeline_id":
			once(fPipeline)
			o.PipelineID = p.intern()
		case "destination_id":
			once(fDestination)
			o.DestinationID = p.intern()
		case "source":
			once(fSource)
			var src int
			p.object(func(key []byte) {
				switch string(key) {
				case "id":
					once2(&src, 1)
					o.Source.ID = p.intern()
				case "digest":
					once2(&src, 2)
					o.Source.Digest = p.intern()
				case "created":
					once2(&src, 4)
					o.Source.Created = p.time()
				default:
					fallback()
				}
			})
			if src != 7 {
				fallback()
			}
		case "kind":
			once(fKind)
			o.Kind = p.intern()
		case "source_path":
			once(fSourcePath)
			o.SourcePath = p.nonEmpty()
		case "transform":
			once(fTransform)
			o.Transform = p.intern()
			if o.Transform == "" {
				fallback()
			}
		case "sha256":
			once(fSHA256)
			o.SHA256 = p.str()
		case "size":
			once(fSize)
			o.Size = p.int()
		case "created_at":
			once(fCreated)
			o.CreatedAt = p.time()
		case "updated_at":
			once(fUpdated)
			o.UpdatedAt = p.time()
		case "url":
			once(fURL)
			o.URL = p.nonEmpty()
		default:
			fallback()
		}
	})
	if seen&fRequired != fRequired {
		fallback()
	}
	return o
}

func once2(seen *int, bit int) {
	if *seen&bit != 0 {
		fallback()
	}
	*seen |= bit
}

// --- encoder ---

// marshalFast writes c (valid, sorted) exactly as encoding/json's Encoder
// with two-space indent and SetEscapeHTML(false) writes the wire structs.
func marshalFast(c *Catalog) []byte {
	var t timeCache
	b := make([]byte, 0, 512)
	b = append(b, "{\n  \"schema_version\": "...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	if c.DistributorVersion != "" {
		b = append(b, ",\n  \"distributor_version\": "...)
		b = appendString(b, c.DistributorVersion)
	}
	b = append(b, ",\n  \"created_at\": "...)
	b = appendTime(b, c.CreatedAt)
	b = append(b, ",\n  \"updated_at\": "...)
	b = appendTime(b, c.UpdatedAt)
	b = append(b, ",\n  \"state\": {\n    \"mode\": \""+ModeCatalog+"\"\n  },\n  \"outputs\": ["...)
	if len(c.Outputs) == 0 {
		return append(b, "]\n}\n"...)
	}
	for i := range c.Outputs {
		start := len(b)
		if i > 0 {
			b = append(b, ',')
		}
		b = t.appendOutput(b, &c.Outputs[i])
		if i == 0 {
			// Grow once, from the first record's size, instead of doubling
			// through half a gigabyte.
			b = slices.Grow(b, (len(b)-start+64)*len(c.Outputs)+16)
		}
	}
	return append(b, "\n  ]\n}\n"...)
}

// timeCache remembers the last rendering of each record time: records next
// to each other mostly share them.
type timeCache struct {
	src, created, updated struct {
		t time.Time
		s []byte
	}
}

func (tc *timeCache) appendOutput(b []byte, o *Output) []byte {
	b = append(b, "\n    {\n      \"path\": "...)
	b = appendString(b, o.Path)
	b = append(b, ",\n      \"pipeline_id\": "...)
	b = appendString(b, o.PipelineID)
	b = append(b, ",\n      \"destination_id\": "...)
	b = appendString(b, o.DestinationID)
	b = append(b, ",\n      \"source\": {\n        \"id\": "...)
	b = appendString(b, o.Source.ID)
	b = append(b, ",\n        \"digest\": "...)
	b = appendString(b, o.Source.Digest)
	b = append(b, ",\n        \"created\": "...)
	b = appendCached(b, &tc.src.t, &tc.src.s, o.Source.Created)
	b = append(b, "\n      },\n      \"kind\": "...)
	b = appendString(b, o.Kind)
	if o.SourcePath != "" {
		b = append(b, ",\n      \"source_path\": "...)
		b = appendString(b, o.SourcePath)
	}
	if o.Transform != "" {
		b = append(b, ",\n      \"transform\": "...)
		b = appendString(b, o.Transform)
	}
	b = append(b, ",\n      \"sha256\": "...)
	b = appendString(b, o.SHA256)
	b = append(b, ",\n      \"size\": "...)
	b = strconv.AppendInt(b, o.Size, 10)
	b = append(b, ",\n      \"created_at\": "...)
	b = appendCached(b, &tc.created.t, &tc.created.s, o.CreatedAt)
	b = append(b, ",\n      \"updated_at\": "...)
	b = appendCached(b, &tc.updated.t, &tc.updated.s, o.UpdatedAt)
	if o.URL != "" {
		b = append(b, ",\n      \"url\": "...)
		b = appendString(b, o.URL)
	}
	return append(b, "\n    }"...)
}

func appendCached(b []byte, last *time.Time, s *[]byte, t time.Time) []byte {
	if *s == nil || !last.Equal(t) {
		*last = t
		*s = appendTime((*s)[:0], t)
	}
	return append(b, *s...)
}

// appendTime appends FormatTime(t) as a JSON string (it needs no escaping).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json does with HTML escaping
// off: quote, backslash and control characters escaped, U+2028 and U+2029
// as \u escapes, invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// sorted reports whether outputs are in path order (the written order).
func sorted(outs []Output) bool {
	return slices.IsSortedFunc(outs, func(a, b Output) int { return strings.Compare(a.Path, b.Path) })
}
