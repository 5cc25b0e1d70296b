package fakes3

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// put answers a plain PutObject itself, or returns false (nothing written,
// the body unread) for gofakes3 to answer. gofakes3 hashes every object
// twice: its request reader computes the MD5 for the ETag and its memory
// backend computes it again to store it, on the cores the client shares. This reads the body whole,
// lets the backend store (and hash) it once, and answers with the ETag
// the backend recorded, read under the lock that keeps every other
// object write out between the two (writes). Any failure, and any request
// that is not a plain write (a copy, a part, aws-chunked framing, a
// Content-MD5 to check, a clock gofakes3 might call skewed, metadata over
// gofakes3's default limit) is handed to
// gofakes3 with the body as read, for its own answer.
func (s *Server) put(w http.ResponseWriter, r *http.Request) bool {
	bucket, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodPut || !ok || bucket == "" || key == "" || len(key) > gofakes3.KeySizeLimit || !plainPut(r) {
		return false
	}
	size, err := strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64)
	if err != nil || size < 0 || size != r.ContentLength {
		return false
	}
	body := make([]byte, size)
	n, err := io.ReadFull(r.Body, body)
	if err != nil {
		// gofakes3 meets the same end of the body and says so.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:n]), errReader{err}))
		return false
	}
	meta := metadata(r.Header)
	if metadataSize(meta) > gofakes3.DefaultMetadataSizeLimit {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false // gofakes3 refuses it
	}
	s.writes.Lock()
	_, err = s.Mem.PutObject(bucket, key, meta, bytes.NewReader(body), size, putConditions(r.Header))
	var obj *gofakes3.Object
	if err == nil {
		obj, err = s.Mem.HeadObject(bucket, key)
	}
	s.writes.Unlock()
	if obj != nil && obj.Contents != nil {
		_ = obj.Contents.Close()
	}
	if err != nil {
		// A failed condition, a missing bucket: nothing stored; gofakes3
		// tries the same write and answers in its words.
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	h := s.answerHeader(w)
	if obj.VersionID != "" {
		h.Set("x-amz-version-id", string(obj.VersionID))
	}
	h.Set("ETag", `"`+hex.EncodeToString(obj.Hash)+`"`)
	w.WriteHeader(http.StatusOK)
	return true
}

// plainPut: a PutObject of a body as it is (no copy, no part, no framing,
// no Content-MD5), whose clock gofakes3 would not call skewed.
func plainPut(r *http.Request) bool {
	for k := range r.URL.Query() {
		if k != "x-id" {
			return false
		}
	}
	hd := r.Header
	if hd.Get("X-Amz-Copy-Source") != "" || strings.HasPrefix(hd.Get("X-Amz-Content-Sha256"), "STREAMING-") ||
		hd.Get("X-Amz-Decoded-Content-Length") != "" || hd.Get("Content-Encoding") == "aws-chunked" {
		return false
	}
	if _, ok := hd["Content-Md5"]; ok {
		return false
	}
	if d := hd.Get("X-Amz-Date"); d != "" {
		at, err := time.Parse("20060102T150405Z", d)
		if skew := time.Since(at); err != nil || skew < -time.Minute || skew > time.Minute {
			return false
		}
	}
	return true
}

// metadata is gofakes3's metadataHeaders: the x-amz-* headers (the
// first value of each), Content-Type, -Disposition and -Encoding, and
// the time as Last-Modified.
func metadata(hd http.Header) map[string]string {
	meta := make(map[string]string)
	for k, v := range hd {
		if strings.HasPrefix(k, "X-Amz-") || k == "Content-Type" || k == "Content-Disposition" || k == "Content-Encoding" {
			meta[k] = v[0]
		}
	}
	meta["Last-Modified"] = time.Now().UTC().Format("Mon, 02 Jan 2006 15:04:05") + " GMT"
	return meta
}

// metadataSize is gofakes3's: the bytes of the names and values.
func metadataSize(meta map[string]string) int {
	n := 0
	for k, v := range meta {
		n += len(k) + len(v)
	}
	return n
}

// putConditions is gofakes3's parsePutConditions.
func putConditions(hd http.Header) *gofakes3.PutConditions {
	var c *gofakes3.PutConditions
	if v := hd.Get("If-Match"); v != "" {
		c = &gofakes3.PutConditions{IfMatch: &v}
	}
	if v := hd.Get("If-None-Match"); v != "" {
		if c == nil {
			c = &gofakes3.PutConditions{}
		}
		c.IfNoneMatch = &v
	}
	return c
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
