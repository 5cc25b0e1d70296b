// Package jsonfast is a strict, allocation-light JSON reader for documents
// of a known shape (catalogs, manifests) that stays on a fast path only for
// input whose meaning is beyond doubt: no null, only exact keys the caller
// knows (the caller rejects repeats), plain integers, valid UTF-8. Anything
// else makes the caller fall back to its encoding/json reader, whose answer
// (and error message) stays the reference. Strings with escapes are decoded
// by encoding/json itself.
package jsonfast

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
)

// errFallback makes Run report that the input left the fast path.
type errFallback struct{}

// internMax bounds the strings one parse interns: ids and times repeat across
// records, paths and digests do not.
const internMax = 1 << 16

// Parser reads one JSON document. Its methods panic with a private value
// when the input leaves the fast path; Run turns that into ok == false.
type Parser struct {
	data  []byte
	i     int
	strs  map[string]string
	times map[string]time.Time
}

// Run parses data with read, which must consume one value; ok is false when
// the input left the fast path (read's result is then to be ignored), or
// when anything but whitespace follows the value.
func Run[T any](data []byte, read func(p *Parser) T) (v T, ok bool) {
	p := &Parser{data: data, strs: map[string]string{}, times: map[string]time.Time{}}
	defer func() {
		if r := recover(); r != nil {
			if _, fb := r.(errFallback); !fb {
				panic(r)
			}
			var zero T
			v, ok = zero, false
		}
	}()
	v = read(p)
	p.ws()
	if p.i != len(p.data) {
		var zero T
		return zero, false
	}
	return v, true
}

// Fallback leaves the fast path (from inside Run).
func Fallback() { panic(errFallback{}) }

// Keys records which keys of one object were read, a bit each. A key read
// twice leaves the fast path, so that the reference reader reports it.
type Keys uint64

// Once marks key i (0 to 63) as read.
func (k *Keys) Once(i uint) {
	if *k&(1<<i) != 0 {
		Fallback()
	}
	*k |= 1 << i
}

func (p *Parser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ':
			// Indentation: a run of spaces is skipped eight bytes at a
			// time (the first byte is a space, so a step is never zero).
			if p.i+8 <= len(p.data) {
				if x := binary.LittleEndian.Uint64(p.data[p.i:]) ^ spaces; x != 0 {
					p.i += bits.TrailingZeros64(x) / 8
				} else {
					p.i += 8
				}
				continue
			}
			p.i++
		case '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// spaces is eight spaces read as one word.
const spaces = ' ' * lows

// expect consumes c after optional whitespace.
func (p *Parser) Expect(c byte) {
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != c {
		Fallback()
	}
	p.i++
}

// peek returns the next non-space byte without consuming it.
func (p *Parser) Peek() byte {
	p.ws()
	if p.i >= len(p.data) {
		Fallback()
	}
	return p.data[p.i]
}

// object calls field for every key; field must consume the value.
func (p *Parser) Object(field func(key []byte)) {
	p.Expect('{')
	if p.Peek() == '}' {
		p.i++
		return
	}
	for {
		key := p.rawString()
		p.Expect(':')
		field(key)
		switch p.Peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return
		default:
			Fallback()
		}
	}
}

// rawString returns the bytes of a string with no escapes, valid UTF-8 and
// no control characters; anything else falls back (a string with escapes
// goes through str instead).
func (p *Parser) rawString() []byte {
	p.Expect('"')
	start := p.i
	ascii := true
	p.i += PlainPrefix(p.data[p.i:])
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := p.data[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				Fallback()
			}
			return s
		case c == '\\' || c < 0x20:
			Fallback()
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	Fallback()
	return nil
}

// str reads a string value; escaped strings are decoded by encoding/json so
// that their meaning is exactly the reference decoder's.
func (p *Parser) Str() string {
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		Fallback()
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
			Fallback()
		}
	}
	if j >= len(p.data) {
		Fallback()
	}
	p.i = j + 1
	raw := p.data[start:p.i]
	if !utf8.Valid(raw) {
		Fallback() // encoding/json would replace the bytes: leave it to it
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		Fallback()
	}
	return s
}

// nonEmpty reads a string that must not be empty (optional fields).
func (p *Parser) NonEmpty() string {
	s := p.Str()
	if s == "" {
		Fallback()
	}
	return s
}

// intern reads a string and returns a shared copy of repeated values.
func (p *Parser) Intern() string {
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
	return p.Str()
}

// tryRaw is rawString that reports an escape instead of falling back.
func (p *Parser) tryRaw() ([]byte, bool) {
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		Fallback() // not a string at all (a time written without quotes)
	}
	start := p.i + 1
	ascii := true
	for j := start + PlainPrefix(p.data[start:]); j < len(p.data); j++ {
		switch c := p.data[j]; {
		case c == '"':
			s := p.data[start:j]
			if !ascii && !utf8.Valid(s) {
				Fallback()
			}
			p.i = j + 1
			return s, true
		case c == '\\':
			return nil, false
		case c < 0x20:
			Fallback()
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	Fallback()
	return nil, false
}

// Time reads an RFC 3339 time with parse (which must be a pure function
// of the string), remembering repeats.
func (p *Parser) Time(parse func(string) (time.Time, error)) time.Time {
	p.ws()
	start := p.i
	b, ok := p.tryRaw()
	if !ok {
		p.i = start
		t, err := parse(p.Str())
		if err != nil {
			Fallback()
		}
		return t
	}
	if t, ok := p.times[string(b)]; ok {
		return t
	}
	t, err := parse(string(b))
	if err != nil {
		Fallback()
	}
	if len(p.times) < internMax {
		p.times[string(b)] = t
	}
	return t
}

// int reads a JSON integer without fraction or exponent that fits int64.
func (p *Parser) Int() int64 {
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
		Fallback()
	}
	if p.i < len(p.data) {
		switch p.data[p.i] {
		case '.', 'e', 'E':
			Fallback()
		}
	}
	v, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 64)
	if err != nil {
		Fallback()
	}
	return v
}

// Array calls elem for every element of an array; elem must consume it.
func (p *Parser) Array(elem func()) {
	p.Expect('[')
	if p.Peek() == ']' {
		p.i++
		return
	}
	for {
		elem()
		switch p.Peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return
		default:
			Fallback()
		}
	}
}

// Len is the size of the whole input, for sizing what it holds.
func (p *Parser) Len() int { return len(p.data) }

// Rest returns the input after optional whitespace, from the current
// position; Skip(n) then consumes n of its bytes. Together they let a
// caller read a value it knows the exact form of by itself.
func (p *Parser) Rest() []byte {
	p.ws()
	return p.data[p.i:]
}

// Pos is the current offset in the input.
func (p *Parser) Pos() int { return p.i }

// Skip consumes n bytes (of Rest).
func (p *Parser) Skip(n int) { p.i += n }
