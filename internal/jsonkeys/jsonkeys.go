// Package jsonkeys finds object keys that appear twice in one JSON object.
// encoding/json silently keeps the last of them; for documents whose meaning
// must not be guessed (catalogs, manifests) a repeated key is an error.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// DuplicateError names a repeated key and the object that holds it.
type DuplicateError struct {
	Key  string // as written the second time, unescaped
	Path string // the object: "" for the top level, else like "outputs[3].source"
}

func (e *DuplicateError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("duplicate key %q", e.Key)
	}
	return fmt.Sprintf("duplicate key %q in %s", e.Key, e.Path)
}

// smallObject is how many keys an object may have before its keys are kept
// in a map instead of being compared one by one.
const smallObject = 16

type span struct{ from, to int }

type frame struct {
	obj   bool
	keys  int                 // object: index in scanner.keys of its first key
	arena int                 // object: where its folded keys start in scanner.arena
	set   map[string]struct{} // object: its folded keys, once it has many
	key   span                // object: raw bytes (quoted) of the current key
	index int                 // array: the current element
}

type scanner struct {
	data   []byte
	frames []frame
	keys   []span // folded keys of all open objects, innermost last
	arena  []byte
}

// Duplicate returns the first key that appears twice in one object, or nil.
// Keys are compared as encoding/json matches them to struct fields: after
// unescaping and case-insensitively, so {"a":1,"A":2} repeats "a" too.
//
// data must already be valid JSON (decode it with encoding/json first): on
// malformed input the result means nothing, though Duplicate never panics.
// It is a single pass over the bytes and allocates only for keys that are
// escaped, non-ASCII or in objects with many keys.
func Duplicate(data []byte) *DuplicateError {
	s := scanner{data: data}
	expectKey := false
	for i := 0; i < len(data); {
		switch data[i] {
		case '{':
			s.frames = append(s.frames, frame{obj: true, keys: len(s.keys), arena: len(s.arena)})
			expectKey = true
			i++
		case '[':
			s.frames = append(s.frames, frame{})
			expectKey = false
			i++
		case '}', ']':
			if n := len(s.frames); n > 0 {
				if f := s.frames[n-1]; f.obj {
					s.keys, s.arena = s.keys[:f.keys], s.arena[:f.arena]
				}
				s.frames = s.frames[:n-1]
			}
			expectKey = false
			i++
		case ',':
			if n := len(s.frames); n > 0 {
				if f := &s.frames[n-1]; f.obj {
					expectKey = true
				} else {
					f.index++
				}
			}
			i++
		case '"':
			end := stringEnd(data, i)
			if expectKey && len(s.frames) > 0 && s.frames[len(s.frames)-1].obj {
				if err := s.addKey(span{i, end}); err != nil {
					return err
				}
				expectKey = false
			}
			i = end
		default: // whitespace, ':', numbers, literals
			i++
		}
	}
	return nil
}

// stringEnd returns the index just past the string that opens at data[i].
func stringEnd(data []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data)
		}
		j += k

		// The quote ends the string unless an odd run of backslashes escapes it.
		b := 0
		for data[j-1-b] == '\\' {
			b++
		}
		j++
		if b%2 == 0 {
			return j
		}
	}
}

// addKey records the key in the innermost object, or reports it repeated.
func (s *scanner) addKey(raw span) *DuplicateError {
	f := &s.frames[len(s.frames)-1]
	f.key = raw
	start := len(s.arena)
	s.arena = s.fold(s.arena, raw)
	folded := s.arena[start:]
	own := s.keys[f.keys:]
	dup := false
	switch {
	case f.set != nil:
		_, dup = f.set[string(folded)]
	default:
		for _, k := range own {
			if bytes.Equal(s.arena[k.from:k.to], folded) {
				dup = true
				break
			}
		}
	}
	if dup {
		return &DuplicateError{Key: unquote(s.data[raw.from:raw.to]), Path: s.path()}
	}
	if f.set == nil && len(own) >= smallObject {
		f.set = make(map[string]struct{}, 2*smallObject)
		for _, k := range own {
			f.set[string(s.arena[k.from:k.to])] = struct{}{}
		}
	}
	if f.set != nil {
		f.set[string(folded)] = struct{}{}
	}
	s.keys = append(s.keys, span{start, len(s.arena)})
	return nil
}

// fold appends the key's folded form: encoding/json's field-name folding
// (every rune to the smallest rune of its simple case-fold set).
func (s *scanner) fold(dst []byte, raw span) []byte {
	in := s.data[raw.from+1 : max(raw.from+1, raw.to-1)]
	plain := true
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if !plain {
		in = []byte(unquote(s.data[raw.from:raw.to]))
	}
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// unquote decodes a JSON string as encoding/json does (invalid UTF-8
// becomes U+FFFD); on malformed input it returns the bytes as they are.
func unquote(quoted []byte) string {
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return string(quoted)
	}
	return s
}

// path names the innermost object: "outputs[3].source" ("" = the top level).
func (s *scanner) path() string {
	var b []byte
	for _, f := range s.frames[:len(s.frames)-1] {
		if !f.obj {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(f.index), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, unquote(s.data[f.key.from:f.key.to])...)
	}
	return string(b)
}
