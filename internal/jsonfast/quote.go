package jsonfast

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as encoding/json writes it: quote,
// backslash and control characters escaped, U+2028 and U+2029 as \u
// escapes, invalid UTF-8 as \ufffd. With html, '<', '>' and '&' are \u
// escapes too, as json.Marshal writes them; without, they stay as they
// are, as an Encoder with SetEscapeHTML(false) writes them.
func AppendString(b []byte, s string, html bool) []byte {
	b = append(b, '"')
	start, i := 0, 0
	if !html {
		i = PlainPrefix(s) // it takes '<', '>' and '&' as plain
	}
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && !(html && htmlChar(c)) {
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
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// StringLen is len(AppendString(nil, s, html)), without writing it.
func StringLen(s string, html bool) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && !(html && htmlChar(c)):
				n++
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			default:
				n += len(`\u00XX`)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += len(`\uXXXX`)
		} else {
			n += size
		}
		i += size
	}
	return n
}

// htmlChar reports whether encoding/json escapes c for HTML.
func htmlChar(c byte) bool { return c == '<' || c == '>' || c == '&' }
