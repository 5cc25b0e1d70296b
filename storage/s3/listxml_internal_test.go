package s3

import (
	"crypto/md5"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The scanner reads gofakes3's listing (the form AWS writes too) and
// refuses what it does not know, so that the SDK decodes it instead.
func md5hex(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }

func TestParseListPage(t *testing.T) {
	mem := s3mem.New()
	if err := mem.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a&b<c>.txt", `q"'.txt`, "é/日本.txt"} {
		if _, err := mem.PutObject("b", k, map[string]string{}, strings.NewReader("xy"), 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/b?list-type=2&max-keys=2")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var page listPage
	if !parseListPage(body, &page) {
		t.Fatalf("parseListPage refused gofakes3's listing:\n%s", body)
	}
	if !page.truncated || page.next == "" || len(page.objects) != 2 {
		t.Fatalf("page = %+v, want 2 objects, truncated, a continuation token", page)
	}
	o := page.objects[0]
	if o.key != "a&b<c>.txt" || o.size != 2 || o.etag != `"`+md5hex("xy")+`"` || time.Since(o.modTime) > time.Hour {
		t.Fatalf("first object = %+v", o)
	}
	if page.objects[1].key != `q"'.txt` {
		t.Fatalf("second key = %q", page.objects[1].key)
	}
	for name, doc := range map[string]string{
		"cdata":        `<ListBucketResult><Contents><Key><![CDATA[a]]></Key><Size>1</Size></Contents></ListBucketResult>`,
		"comment":      `<ListBucketResult><!-- x --></ListBucketResult>`,
		"carriage":     "<ListBucketResult><Contents><Key>a\r</Key><Size>1</Size></Contents></ListBucketResult>",
		"cr reference": `<ListBucketResult><Contents><Key>a&#13;</Key><Size>1</Size></Contents></ListBucketResult>`,
		"entity":       `<ListBucketResult><Contents><Key>a&nbsp;</Key><Size>1</Size></Contents></ListBucketResult>`,
		"no size":      `<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>`,
		"empty tag":    `<ListBucketResult><Contents><Key/><Size>1</Size></Contents></ListBucketResult>`,
		"truncated":    `<ListBucketResult><Contents><Key>a</Key><Size>1</Size>`,
		"other root":   `<Error><Code>x</Code></Error>`,
		"trailing":     `<ListBucketResult></ListBucketResult><x>`,
		"bad bool":     `<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>`,
	} {
		if parseListPage([]byte(doc), &listPage{}) {
			t.Errorf("%s: parseListPage accepted %q", name, doc)
		}
	}
	var p listPage
	ok := parseListPage([]byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<ListBucketResult xmlns="x"><Name>b</Name>`+
		`<Contents><Key>k&#x41;&#66;</Key><Owner><ID>1</ID></Owner><Size>7</Size><ETag>&quot;e&quot;</ETag></Contents>`+
		`<IsTruncated>false</IsTruncated></ListBucketResult>`), &p)
	if !ok || len(p.objects) != 1 || p.objects[0].key != "kAB" || p.objects[0].etag != `"e"` || p.objects[0].size != 7 || p.truncated {
		t.Fatalf("parse = %v, %+v", ok, p)
	}
}

// The hand-written readers of a listing's Size and LastModified agree
// with strconv.ParseInt and time.Parse(time.RFC3339Nano) on every input.
func TestListValuesReadAsTheStandardLibraryReadsThem(t *testing.T) {
	for _, s := range []string{"", "0", "7", "007", "4096", "+5", "-1", "12a", " 1", "922337203685477580",
		"9223372036854775807", "9223372036854775808", "99999999999999999999"} {
		got, ok := parseSize([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseSize(%q) = %d, %v; ParseInt = %d, %v", s, got, ok, want, err)
		}
	}
	for _, s := range []string{"2026-12-03T11:38:16.158Z", "2026-12-03T11:38:16.16Z", "2026-12-03T11:38:16Z",
		"2026-12-03T11:38:16.123456789Z", "2026-12-03T11:38:16.1234567891Z", "2026-12-03T11:38:16.Z",
		"2024-02-29T00:00:00Z", "2026-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z",
		"2026-12-03T24:00:00Z", "2026-12-03T11:60:00Z", "2026-12-03T11:38:60Z", "2026-12-03T11:38:16+02:00",
		"2026-12-03t11:38:16Z", "2026-12-03T11:38:16.158z", "0000-01-01T00:00:00Z", "2026-1-03T11:38:16Z", "x"} {
		got, ok := parseTime([]byte(s))
		want, err := time.Parse(time.RFC3339Nano, s)
		if ok != (err == nil) || (ok && (!got.Equal(want) || got.Location() != want.Location())) {
			t.Errorf("parseTime(%q) = %v, %v; time.Parse = %v, %v", s, got, ok, want, err)
		}
	}
}

// BenchmarkParseListPage: one page of 1,000 keys as gofakes3 writes it.
func BenchmarkParseListPage(b *testing.B) {
	mem := s3mem.New()
	if err := mem.CreateBucket("b"); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		k := fmt.Sprintf("dir%02d/file%06d.bin", i%50, i)
		if _, err := mem.PutObject("b", k, map[string]string{}, strings.NewReader(k), int64(len(k)), nil); err != nil {
			b.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/b?list-type=2")
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var page listPage
		if !parseListPage(body, &page) || len(page.objects) != 1000 {
			b.Fatal("parseListPage refused the page")
		}
	}
}

// Text is unescaped as encoding/xml unescapes it, the ETag form's
// shortcut included.
func TestUnescapeXMLIsEncodingXMLs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"&#34;d41d8cd98f00b204e9800998ecf8427e&#34;", "&#34;&#34;", "&#34;a&amp;b&#34;", "&#34;abc", "abc&#34;",
		"&#34;a&#34;b&#34;", "&#34;x&#34;&#34;", "&#34;-1&#34;", "&#34;&#34;&#34;", "a&lt;b", "&#34;é&#34;",
	} {
		var want string
		if err := xml.Unmarshal([]byte("<a>"+raw+"</a>"), &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := unescapeXML([]byte(raw)); !ok || got != want {
			t.Errorf("unescapeXML(%q) = %q, %v; encoding/xml: %q", raw, got, ok, want)
		}
	}
}
