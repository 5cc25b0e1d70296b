// Package fakes3 is the local S3 server of the tests and of the bench
// harness: gofakes3 with its memory backend, except that it answers
// plain PutObjects (put.go) and ListObjectsV2 itself. gofakes3 encodes a listing with encoding/xml's
// reflection (a MarshalXML call and a time format per key), the largest
// part of the server's work in a republish, on the cores the client
// shares. This handler asks the same
// backend for the same page and writes the bytes gofakes3 would write,
// by hand (TestListingIsGofakes3s compares them); any listing it does not
// know (another list type, a delimiter, fetch-owner, an encoding type, a
// bad token or max-keys, a missing bucket) goes to gofakes3.
package fakes3

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is the S3 handler and the backend holding its objects.
type Server struct {
	// Mem holds the buckets and objects (for the harness's bucket admin).
	Mem     *s3mem.Backend
	gofakes http.Handler

	// requestID numbers the requests this handler answers itself.
	requestID atomic.Uint64

	// writes keeps gofakes3's object writes out of put's store-then-read
	// of the ETag (put holds it; gofakes3's writes share it).
	writes sync.RWMutex
}

// New returns a server with an empty memory backend; opts go to gofakes3.
func New(opts ...gofakes3.Option) *Server {
	mem := s3mem.New()
	return &Server{Mem: mem, gofakes: gofakes3.New(mem, opts...).Server()}
}

// listKeys are the query keys of the listings answered here.
var listKeys = map[string]bool{"list-type": true, "prefix": true, "delimiter": true, "marker": true,
	"start-after": true, "continuation-token": true, "max-keys": true}

// ServeHTTP answers plain listings and PutObjects itself, anything else
// through gofakes3.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.list(w, r) || s.put(w, r) {
		return
	}

	// Reads, and parts (invisible until completed), change no object.
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !(r.Method == http.MethodPut && r.URL.Query().Has("uploadId")) {
		s.writes.RLock()
		defer s.writes.RUnlock()
	}
	s.gofakes.ServeHTTP(w, r)
}

// list answers a ListObjects (v1 or v2) of a bucket, or returns false
// (nothing written) for gofakes3 to answer.
func (s *Server) list(w http.ResponseWriter, r *http.Request) bool {
	bucket := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	v2 := first(q, "list-type") == "2"
	if r.Method != http.MethodGet || bucket == "" || strings.Contains(bucket, "/") || (q.Has("list-type") && !v2) {
		return false
	}
	for k := range q {
		if !listKeys[k] {
			return false
		}
	}
	page, ok := pageFromQuery(q)
	if !ok {
		return false
	}
	l := listing{bucket: bucket, v2: v2, q: q, prefix: first(q, "prefix"), delimiter: first(q, "delimiter"), page: page}
	var err error
	switch l.delimiter {
	case "":
		l.objects, err = s.Mem.ListBucket(bucket, &gofakes3.Prefix{HasPrefix: l.prefix != "", Prefix: l.prefix}, page)
	case "/":
		l.objects, ok, err = s.delimited(bucket, l.prefix, page)
	default:
		return false
	}
	if err != nil || !ok {
		return false // gofakes3 says why, in its words
	}
	body := l.append(make([]byte, 0, 512+300*len(l.objects.Contents)+100*len(l.objects.CommonPrefixes)))
	h := s.answerHeader(w)

	// gofakes3 sets application/xml after writing, too late: net/http
	// has sniffed the body by then.
	h.Set("Content-Type", "text/xml; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
	return true
}

// pageFromQuery is gofakes3's reading of max-keys (clamped to 0–1000),
// marker, continuation-token (its base64 of the marker) and start-after.
func pageFromQuery(q map[string][]string) (gofakes3.ListBucketPage, bool) {
	page := gofakes3.ListBucketPage{MaxKeys: gofakes3.DefaultMaxBucketKeys}
	if v := first(q, "max-keys"); v != "" {
		n, err := strconv.ParseInt(v, 10, 0)
		if err != nil {
			return page, false
		}
		page.MaxKeys = min(max(n, 0), gofakes3.MaxBucketKeys)
	}
	if _, ok := q["marker"]; ok {
		page.HasMarker, page.Marker = true, first(q, "marker")
	} else if _, ok := q["continuation-token"]; ok {
		m, err := base64.URLEncoding.DecodeString(first(q, "continuation-token"))
		if err != nil {
			return page, false
		}
		page.HasMarker, page.Marker = true, string(m)
	} else if _, ok := q["start-after"]; ok {
		page.HasMarker, page.Marker = true, first(q, "start-after")
	}
	return page, true
}

func first(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// listing is one listing request and its answer.
type listing struct {
	bucket            string
	v2                bool
	q                 map[string][]string
	prefix, delimiter string
	page              gofakes3.ListBucketPage
	objects           *gofakes3.ObjectList
}

// append appends the XML gofakes3 writes for the answer (encoding/xml,
// two-space indent; no owners).
func (l *listing) append(b []byte) []byte {
	b = append(b, xml.Header...)
	b = append(b, `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`...)
	b = element(b, "\n  ", "Name", l.bucket)
	b = element(b, "\n  ", "IsTruncated", strconv.FormatBool(l.objects.IsTruncated))
	if l.delimiter != "" {
		b = element(b, "\n  ", "Delimiter", l.delimiter)
	}
	b = element(b, "\n  ", "Prefix", l.prefix)
	if l.page.MaxKeys != 0 {
		b = element(b, "\n  ", "MaxKeys", strconv.FormatInt(l.page.MaxKeys, 10))
	}
	for _, p := range l.objects.CommonPrefixes {
		b = append(b, "\n  <CommonPrefixes>"...)
		b = element(b, "\n    ", "Prefix", p.Prefix)
		b = append(b, "\n  </CommonPrefixes>"...)
	}
	for _, c := range l.objects.Contents {
		b = appendContent(b, c)
	}
	if !l.v2 {
		b = element(b, "\n  ", "Marker", l.page.Marker)
		if l.delimiter != "" && l.objects.NextMarker != "" {
			b = element(b, "\n  ", "NextMarker", l.objects.NextMarker)
		}
		return append(b, "\n</ListBucketResult>"...)
	}
	if v := first(l.q, "continuation-token"); v != "" {
		b = element(b, "\n  ", "ContinuationToken", v)
	}
	if n := len(l.objects.Contents) + len(l.objects.CommonPrefixes); n != 0 {
		b = element(b, "\n  ", "KeyCount", strconv.Itoa(n))
	}
	if l.objects.NextMarker != "" {
		b = element(b, "\n  ", "NextContinuationToken", base64.URLEncoding.EncodeToString([]byte(l.objects.NextMarker)))
	}
	if v := first(l.q, "start-after"); v != "" {
		b = element(b, "\n  ", "StartAfter", v)
	}
	return append(b, "\n</ListBucketResult>"...)
}

// appendContent appends one <Contents> element.
func appendContent(b []byte, c *gofakes3.Content) []byte {
	b = append(b, "\n  <Contents>"...)
	b = element(b, "\n    ", "Key", c.Key)
	if !c.LastModified.IsZero() {
		b = append(b, "\n    <LastModified>"...)
		b = appendTime(b, c.LastModified.UTC())
		b = append(b, "</LastModified>"...)
	}
	b = element(b, "\n    ", "ETag", c.ETag)
	b = element(b, "\n    ", "Size", strconv.FormatInt(c.Size, 10))
	if c.StorageClass != "" {
		b = element(b, "\n    ", "StorageClass", string(c.StorageClass))
	}
	return append(b, "\n  </Contents>"...)
}

// appendTime appends t (UTC) as t.AppendFormat(b, "2006-01-02T15:04:05.999Z")
// does, digit by digit: the layout's interpretation took a third of a
// listing page's CPU. Years outside 0–9999 go through AppendFormat.
func appendTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05.999Z")
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, 'T'), hour, 2)
	b = appendDigits(append(b, ':'), minute, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	if ms := t.Nanosecond() / 1e6; ms != 0 {
		// ".999": milliseconds, trailing zeros dropped.
		digits := 3
		for ms%10 == 0 {
			ms /= 10
			digits--
		}
		b = appendDigits(append(b, '.'), ms, digits)
	}
	return append(b, 'Z')
}

// appendDigits appends n (>= 0) in exactly width digits.
func appendDigits(b []byte, n, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		d := n
		for range i {
			d /= 10
		}
		b = append(b, byte('0'+d%10))
	}
	return b
}

// element appends indent<name>text</name>, text escaped as encoding/xml
// escapes it.
func element(b []byte, indent, name, text string) []byte {
	b = append(b, indent...)
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = escape(b, text)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// escape appends s escaped as encoding/xml escapes it: printable ASCII
// by hand (an ETag's quotes are &#34;), anything else through
// xml.EscapeText.
func escape(b []byte, s string) []byte {
	start := len(b)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			b = append(b, "&#34;"...)
		case c == '\'':
			b = append(b, "&#39;"...)
		case c == '&':
			b = append(b, "&amp;"...)
		case c == '<':
			b = append(b, "&lt;"...)
		case c == '>':
			b = append(b, "&gt;"...)
		case c < 0x20 || c >= 0x7f:
			var sb strings.Builder
			_ = xml.EscapeText(&sb, []byte(s))
			return append(b[:start], sb.String()...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// answerHeader sets the headers gofakes3 puts on every answer, for one
// this handler answers itself, and returns the header.
func (s *Server) answerHeader(w http.ResponseWriter) http.Header {
	id := fmt.Sprintf("%016X", s.requestID.Add(1))
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("x-amz-id-2", base64.StdEncoding.EncodeToString([]byte(id+id+id+id)))
	h.Set("x-amz-request-id", id)
	h.Set("Server", "AmazonS3")
	return h
}
