package s3

import (
	"crypto/md5"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
