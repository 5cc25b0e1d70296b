package s3

// A listing of 10,000 objects is 11 ListObjectsV2 pages, and the SDK's
// XML decoder (encoding/xml, a token and an allocation per element) spent
// about a third of a republish's client CPU on them. fastList reads the
// page's body itself with a scanner for the few elements a listing needs,
// and hands the SDK's own deserializer an empty body. Anything it does
// not expect (CDATA, a comment, a carriage return, an unknown entity,
// nesting inside a known element) gives the body back untouched, and the
// SDK decodes it itself.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// listedObject is one <Contents> entry.
type listedObject struct {
	key, etag string
	size      int64
	modTime   time.Time
}

// listPage is what fastList read from one page.
type listPage struct {
	ok        bool // false: the SDK decoded the page (fall back to its output)
	objects   []listedObject
	truncated bool
	next      string // NextContinuationToken
}

// withFastList reads the page's body into page before the SDK's
// deserializer sees it.
func withFastList(page *listPage) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Insert(middleware.DeserializeMiddlewareFunc("distributorFastList",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				resp, isHTTP := out.RawResponse.(*smithyhttp.Response)
				if err != nil || !isHTTP || resp.StatusCode < 200 || resp.StatusCode >= 300 {
					return out, md, err
				}
				body, rerr := readSized(resp.Body, resp.ContentLength)
				_ = resp.Body.Close()
				if rerr != nil {
					return out, md, fmt.Errorf("read listing: %w", rerr)
				}
				*page = listPage{}
				if parseListPage(body, page) {
					page.ok = true
					body = nil
				} else {
					*page = listPage{}
				}
				resp.Body = io.NopCloser(bytes.NewReader(body))
				return out, md, nil
			}), "OperationDeserializer", middleware.After)
	}
}

// parseListPage scans a ListBucketResult; false: not in the plain form
// it knows (the caller lets the SDK decode it).
func parseListPage(b []byte, page *listPage) bool {
	x := xmlScan{b: b}
	if !x.prolog() || !x.open("ListBucketResult") {
		return false
	}
	for {
		name, end, ok := x.element()
		switch {
		case !ok:
			return false
		case end:
			return string(name) == "ListBucketResult" && x.rest()
		case string(name) == "Contents":
			o, ok := x.contents()
			if !ok {
				return false
			}
			page.objects = append(page.objects, o)
		case string(name) == "IsTruncated":
			t, ok := x.text("IsTruncated")
			if !ok || (string(t) != "true" && string(t) != "false") {
				return false
			}
			page.truncated = string(t) == "true"
		case string(name) == "NextContinuationToken":
			t, ok := x.text("NextContinuationToken")
			if !ok {
				return false
			}
			if page.next, ok = unescapeXML(t); !ok {
				return false
			}
		default:
			if !x.skip() {
				return false
			}
		}
	}
}

// xmlScan walks a document of elements and plain text.
type xmlScan struct {
	b []byte
	i int
}

// prolog skips an optional <?xml …?> declaration and white space.
func (x *xmlScan) prolog() bool {
	x.space()
	if bytes.HasPrefix(x.b[x.i:], []byte("<?xml")) {
		j := bytes.Index(x.b[x.i:], []byte("?>"))
		if j < 0 {
			return false
		}
		x.i += j + 2
	}
	x.space()
	return true
}

func (x *xmlScan) space() {
	for x.i < len(x.b) && (x.b[x.i] == ' ' || x.b[x.i] == '\n' || x.b[x.i] == '\t') {
		x.i++
	}
}

// rest: only white space after the root element.
func (x *xmlScan) rest() bool {
	x.space()
	return x.i == len(x.b)
}

// open reads the start tag of the named element (attributes skipped).
func (x *xmlScan) open(want string) bool {
	name, end, ok := x.element()
	return ok && !end && string(name) == want
}

// element reads the next tag after white space: its name, and whether it
// is an end tag. Comments, CDATA, processing instructions and
// self-closing tags are refused. name points into the page (compared,
// not kept: no allocation per tag).
func (x *xmlScan) element() (name []byte, end, ok bool) {
	x.space()
	if x.i >= len(x.b) || x.b[x.i] != '<' {
		return nil, false, false
	}
	x.i++
	if x.i < len(x.b) && x.b[x.i] == '/' {
		end = true
		x.i++
	}

	// One loop for the '>' and the first white space: tags are short, and
	// bytes.IndexByte's setup costs more than it saves on them.
	start, space := x.i, -1
	for x.i < len(x.b) && x.b[x.i] != '>' {
		if c := x.b[x.i]; space < 0 && (c == ' ' || c == '\t' || c == '\n') {
			space = x.i
		}
		x.i++
	}
	if x.i == len(x.b) {
		return nil, false, false
	}
	tag := x.b[start:x.i]
	x.i++
	if len(tag) == 0 || tag[len(tag)-1] == '/' || tag[0] == '!' || tag[0] == '?' {
		return nil, false, false
	}
	if space >= 0 {
		if end {
			return nil, false, false
		}
		tag = tag[:space-start] // attributes (xmlns) are not needed
	}
	return tag, end, true
}

// text reads an element's raw text up to its end tag (unescapeXML
// resolves it; plainText for values that are not kept).
func (x *xmlScan) text(name string) ([]byte, bool) {
	start := x.i
	for x.i < len(x.b) && x.b[x.i] != '<' {
		x.i++
	}
	if x.i == len(x.b) {
		return nil, false
	}
	raw := x.b[start:x.i]
	if n, end, ok := x.element(); !ok || !end || string(n) != name {
		return nil, false
	}
	return raw, true
}

// plainText is raw with its entities resolved, raw itself when it has none.
func plainText(raw []byte) ([]byte, bool) {
	plain := true
	for _, c := range raw {
		plain = plain && c != '&' && c != '\r'
	}
	if plain {
		return raw, true
	}
	t, ok := unescapeXML(raw)
	return []byte(t), ok
}

// skip passes over an element whose start tag was read, children
// included.
func (x *xmlScan) skip() bool {
	depth := 1
	for depth > 0 {
		j := bytes.IndexByte(x.b[x.i:], '<')
		if j < 0 {
			return false
		}
		if bytes.IndexByte(x.b[x.i:x.i+j], '\r') >= 0 {
			return false
		}
		x.i += j
		_, end, ok := x.element()
		if !ok {
			return false
		}
		if end {
			depth--
		} else {
			depth++
		}
	}
	return true
}

// contents reads one <Contents> element's Key, ETag, Size and
// LastModified; other children are skipped.
func (x *xmlScan) contents() (listedObject, bool) {
	var o listedObject
	var haveKey, haveSize bool
	for {
		name, end, ok := x.element()
		if !ok {
			return o, false
		}
		if end {
			return o, string(name) == "Contents" && haveKey && haveSize
		}
		switch string(name) {
		case "Key":
			o.key, haveKey = x.textString("Key")
			if !haveKey {
				return o, false
			}
		case "ETag":
			if o.etag, ok = x.textString("ETag"); !ok {
				return o, false
			}
		case "Size":
			if o.size, ok = textValue(x, "Size", parseSize); !ok {
				return o, false
			}
			haveSize = true
		case "LastModified":
			if o.modTime, ok = textValue(x, "LastModified", parseTime); !ok {
				return o, false
			}
		default:
			if !x.skip() {
				return o, false
			}
		}
	}
}

// textString reads the element's text, entities resolved.
func (x *xmlScan) textString(name string) (string, bool) {
	raw, ok := x.text(name)
	if !ok {
		return "", false
	}
	return unescapeXML(raw)
}

// textValue reads the element's text, entities resolved, through parse.
func textValue[T any](x *xmlScan, name string, parse func([]byte) (T, bool)) (T, bool) {
	var zero T
	raw, ok := x.text(name)
	if ok {
		raw, ok = plainText(raw)
	}
	if !ok {
		return zero, false
	}
	return parse(raw)
}

// parseSize reads a decimal size: plain digits by hand, anything else as
// strconv.ParseInt reads it.
func parseSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			n, err := strconv.ParseInt(string(b), 10, 64)
			return n, err == nil
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseTime reads an RFC 3339 time: S3's form (2006-01-02T15:04:05.000Z)
// by hand, anything else as time.Parse reads it.
func parseTime(b []byte) (time.Time, bool) {
	if t, ok := parseUTC(b); ok {
		return t, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	return t, err == nil
}

// parseUTC reads YYYY-MM-DDTHH:MM:SS[.fraction]Z; false for any other form
// and for a day past the 28th (time.Parse checks it against the month).
func parseUTC(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(s []byte) int {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d, h, mi, sec := num(b[0:4]), num(b[5:7]), num(b[8:10]), num(b[11:13]), num(b[14:16]), num(b[17:19])
	if y < 0 || mo < 1 || mo > 12 || d < 1 || d > 28 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	ns := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		if ns = num(frac[1:]); ns < 0 {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), true
}

// unescapeXML resolves the five named entities and character references;
// a carriage return (which XML rewrites) or anything else refuses.
func unescapeXML(raw []byte) (string, bool) {
	amp, gt := false, false
	for _, c := range raw { // one pass: keys and ETags are short
		switch c {
		case '\r':
			return "", false
		case '&':
			amp = true
		case '>':
			gt = true
		}
	}
	if gt && bytes.Contains(raw, []byte("]]>")) {
		return "", false
	}
	if !amp {
		return string(raw), true
	}

	// An ETag as encoding/xml writes it, "&#34;" around plain text: one
	// allocation instead of a byte-by-byte copy and two (a quarter of a
	// page's parse).
	const quot = "&#34;"
	if n := len(raw); n >= 2*len(quot) && string(raw[:len(quot)]) == quot && string(raw[n-len(quot):]) == quot &&
		bytes.IndexByte(raw[len(quot):n-len(quot)], '&') < 0 {
		return `"` + string(raw[len(quot):n-len(quot)]) + `"`, true
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '&' {
			out = append(out, raw[i])
			i++
			continue
		}
		j := bytes.IndexByte(raw[i:], ';')
		if j < 0 {
			return "", false
		}
		ent := raw[i+1 : i+j]
		i += j + 1
		switch string(ent) {
		case "#34": // the quotes of every ETag, as encoding/xml writes them
			out = append(out, '"')
		case "amp":
			out = append(out, '&')
		case "lt":
			out = append(out, '<')
		case "gt":
			out = append(out, '>')
		case "quot":
			out = append(out, '"')
		case "apos":
			out = append(out, '\'')
		default:
			r, ok := charRef(string(ent))
			if !ok {
				return "", false
			}
			out = append(out, string(r)...)
		}
	}
	return string(out), true
}

// charRef reads "#NNN" or "#xHH"; \r and invalid code points refuse.
func charRef(ent string) (rune, bool) {
	if len(ent) < 2 || ent[0] != '#' {
		return 0, false
	}
	base, digits := 10, ent[1:]
	if digits[0] == 'x' {
		base, digits = 16, digits[1:]
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil || n == '\r' || n == 0 || n > 0x10FFFF || (n >= 0xD800 && n <= 0xDFFF) {
		return 0, false
	}
	return rune(n), true
}
