package s3

// A listing of 10,000 objects is 11 ListObjectsV2 pages, and the SDK's
// XML decoder (encoding/xml, a token and an allocation per element) spent
// about a third of a republish's client CPU on them. fastList reads the
// page's body itself with a scanner for the few elements a listing needs,
// and hands the SDK's own deserializer an empty body. Anything it does
// not expect (CDATA, a comment, a carriage return, an unknown entity,
// nesting inside a known element) gives the body back untouched, and the
// SDK decodes it as before.

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
				body, rerr := io.ReadAll(resp.Body)
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
			return name == "ListBucketResult" && x.rest()
		case name == "Contents":
			o, ok := x.contents()
			if !ok {
				return false
			}
			page.objects = append(page.objects, o)
		case name == "IsTruncated":
			t, ok := x.text(name)
			if !ok || (t != "true" && t != "false") {
				return false
			}
			page.truncated = t == "true"
		case name == "NextContinuationToken":
			t, ok := x.text(name)
			if !ok {
				return false
			}
			page.next = t
		default:
			if !x.skip(name) {
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
	return ok && !end && name == want
}

// element reads the next tag after white space: its name, and whether it
// is an end tag. Comments, CDATA, processing instructions and
// self-closing tags are refused.
func (x *xmlScan) element() (name string, end, ok bool) {
	x.space()
	if x.i >= len(x.b) || x.b[x.i] != '<' {
		return "", false, false
	}
	x.i++
	if x.i < len(x.b) && x.b[x.i] == '/' {
		end = true
		x.i++
	}
	j := bytes.IndexByte(x.b[x.i:], '>')
	if j < 0 {
		return "", false, false
	}
	tag := x.b[x.i : x.i+j]
	x.i += j + 1
	if len(tag) == 0 || tag[len(tag)-1] == '/' || tag[0] == '!' || tag[0] == '?' {
		return "", false, false
	}
	if k := bytes.IndexAny(tag, " \t\n"); k >= 0 {
		if end {
			return "", false, false
		}
		tag = tag[:k] // attributes (xmlns) are not needed
	}
	return string(tag), end, true
}

// text reads an element's text up to its end tag, entities resolved.
func (x *xmlScan) text(name string) (string, bool) {
	j := bytes.IndexByte(x.b[x.i:], '<')
	if j < 0 {
		return "", false
	}
	raw := x.b[x.i : x.i+j]
	x.i += j
	if n, end, ok := x.element(); !ok || !end || n != name {
		return "", false
	}
	return unescapeXML(raw)
}

// skip passes over an element whose start tag was read, children
// included.
func (x *xmlScan) skip(name string) bool {
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
			return o, name == "Contents" && haveKey && haveSize
		}
		switch name {
		case "Key", "ETag", "Size", "LastModified":
			t, ok := x.text(name)
			if !ok {
				return o, false
			}
			switch name {
			case "Key":
				o.key, haveKey = t, true
			case "ETag":
				o.etag = t
			case "Size":
				n, err := strconv.ParseInt(t, 10, 64)
				if err != nil {
					return o, false
				}
				o.size, haveSize = n, true
			case "LastModified":
				tm, err := time.Parse(time.RFC3339Nano, t)
				if err != nil {
					return o, false
				}
				o.modTime = tm
			}
		default:
			if !x.skip(name) {
				return o, false
			}
		}
	}
}

// unescapeXML resolves the five named entities and character references;
// a carriage return (which XML rewrites) or anything else refuses.
func unescapeXML(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\r') >= 0 || bytes.IndexByte(raw, '>') >= 0 && bytes.Contains(raw, []byte("]]>")) {
		return "", false
	}
	if bytes.IndexByte(raw, '&') < 0 {
		return string(raw), true
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
		ent := string(raw[i+1 : i+j])
		i += j + 1
		switch ent {
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
			r, ok := charRef(ent)
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
