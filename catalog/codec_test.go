package catalog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// TestMarshalMatchesReference: the hand-written writer produces exactly the
// bytes of the encoding/json writer the format was defined with, escapes,
// optional fields and empty catalogs included.
func TestMarshalMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		want, err := catalog.MarshalReference(c)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		got, err := catalog.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Marshal differs from the reference:\n got %s\nwant %s", got, want)
		}
		var streamed bytes.Buffer
		if err := catalog.MarshalTo(&streamed, c); err != nil || !bytes.Equal(streamed.Bytes(), want) {
			t.Fatalf("MarshalTo = %v, differs from the reference:\n got %s\nwant %s", err, streamed.Bytes(), want)
		}
	})
}

// TestParseFastMatchesReference: on written catalogs, in any layout, the
// fast reader takes the input (it is not always falling back) and returns
// exactly what the encoding/json reader returns.
func TestParseFastMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		written, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, written); err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{written, compact.Bytes()} {
			want, legacy, err := catalog.ParseReference(data)
			if err != nil || legacy {
				t.Fatalf("reference: legacy %v, %v", legacy, err)
			}
			got, ok := catalog.ParseFast(data)
			if !ok {
				t.Fatalf("the fast reader refused a written catalog:\n%s", data)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fast reader differs:\n got %+v\nwant %+v", got, want)
			}
		}
	})
}

// TestParseLeavesOddInputToReference: inputs the fast reader must not
// decide (they mean something else to encoding/json, or are errors whose
// message it owns) give the reference decoder's answer.
func TestParseLeavesOddInputToReference(t *testing.T) {
	t.Parallel()
	const rec = `{"path":"a","pipeline_id":"p","destination_id":"d","source":{"id":"s","digest":"sha256:` + hex64 + `","created":"2026-06-19T12:00:00Z"},"kind":"source","sha256":"sha256:` + hex64 + `","size":1,"created_at":"2026-06-19T12:00:00Z","updated_at":"2026-06-19T12:00:00Z"%s}`
	doc := func(extra, record string) string {
		return `{"schema_version":4,"created_at":"2026-06-19T12:00:00Z","updated_at":"2026-06-19T12:00:00Z","state":{"mode":"catalog"}` + extra + `,"outputs":[` + record + `]}`
	}
	plain := strings.Replace(rec, "%s", "", 1)
	for name, in := range map[string]string{
		"plain":                   doc("", plain),
		"null version":            doc(`,"distributor_version":null`, plain),
		"cased key":               doc("", strings.Replace(plain, `"size"`, `"Size"`, 1)),
		"repeated key":            doc("", strings.Replace(rec, "%s", `,"size":2`, 1)),
		"cased repeat":            doc("", strings.Replace(rec, "%s", `,"SIZE":2`, 1)),
		"unknown key":             doc("", strings.Replace(rec, "%s", `,"extra":1`, 1)),
		"float size":              doc("", strings.Replace(plain, `"size":1`, `"size":1.0`, 1)),
		"exponent size":           doc("", strings.Replace(plain, `"size":1`, `"size":1e0`, 1)),
		"negative zero size":      doc("", strings.Replace(plain, `"size":1`, `"size":-0`, 1)),
		"huge size":               doc("", strings.Replace(plain, `"size":1`, `"size":99999999999999999999`, 1)),
		"string size":             doc("", strings.Replace(plain, `"size":1`, `"size":"1"`, 1)),
		"escaped path":            doc("", strings.Replace(plain, `"path":"a"`, `"path":"\u0061\"b"`, 1)),
		"bad surrogate id":        doc("", strings.Replace(plain, `"id":"s"`, `"id":"\ud800"`, 1)),
		"invalid UTF-8 id":        doc("", strings.Replace(plain, `"id":"s"`, "\"id\":\"\xff\"", 1)),
		"empty url":               doc("", strings.Replace(rec, "%s", `,"url":""`, 1)),
		"missing size":            doc("", strings.Replace(plain, `"size":1,`, ``, 1)),
		"offset time":             doc("", strings.Replace(plain, `"created_at":"2026-06-19T12:00:00Z"`, `"created_at":"2026-06-19T14:00:00+02:00"`, 1)),
		"trailing data":           doc("", plain) + ` {}`,
		"trailing comma":          doc("", plain+","),
		"legacy":                  strings.Replace(doc("", plain), `"schema_version":4`, `"schema_version":3`, 1),
		"newer":                   strings.Replace(doc("", plain), `"schema_version":4`, `"schema_version":5`, 1),
		"unsorted":                doc("", strings.Replace(plain, `"path":"a"`, `"path":"b"`, 1)+","+plain),
		"duplicate path":          doc("", plain+","+plain),
		"wrong mode":              strings.Replace(doc("", plain), `"mode":"catalog"`, `"mode":"files"`, 1),
		"control char in string":  doc("", strings.Replace(plain, `"id":"s"`, "\"id\":\"a\tb\"", 1)),
		"escaped control char id": doc("", strings.Replace(plain, `"id":"s"`, `"id":"a\tb"`, 1)),
	} {
		t.Run(name, func(t *testing.T) {
			want, wantLegacy, wantErr := catalog.ParseReference([]byte(in))
			got, legacy, err := catalog.Parse([]byte(in))
			if !reflect.DeepEqual(got, want) || legacy != wantLegacy || errString(err) != errString(wantErr) {
				t.Fatalf("Parse = %+v, %v, %v\nreference %+v, %v, %v", got, legacy, err, want, wantLegacy, wantErr)
			}
		})
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// chunkCounter counts the writes MarshalTo makes.
type chunkCounter struct {
	bytes.Buffer
	writes, largest int
}

func (c *chunkCounter) Write(p []byte) (int, error) {
	c.writes++
	c.largest = max(c.largest, len(p))
	return c.Buffer.Write(p)
}

// TestMarshalToStreams: a catalog of a few megabytes, read with ParseOwned
// and grown by new records, goes out in bounded chunks, byte for byte what
// Marshal returns.
func TestMarshalToStreams(t *testing.T) {
	t.Parallel()
	data, err := catalog.Marshal(benchCat(20_000))
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := catalog.ParseOwned(data)
	if err != nil {
		t.Fatal(err)
	}
	next := successorAdding10(cur)
	want, err := catalog.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	var got chunkCounter
	if err := catalog.MarshalTo(&got, next); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("MarshalTo wrote %d bytes that differ from Marshal's %d", got.Len(), len(want))
	}
	if got.writes < len(want)/(512<<10) || got.largest > 512<<10 {
		t.Fatalf("MarshalTo wrote %d bytes in %d writes of at most %d bytes; want chunks of at most 512 KiB", len(want), got.writes, got.largest)
	}
}

// successorAdding10 is the catalog after a publication that adds 10 records
// to cur (copies of its first ones under new paths), as the engine builds it.
func successorAdding10(cur *catalog.Catalog) *catalog.Catalog {
	next := cur.Successor()
	next.Outputs = append(next.Outputs, cur.Outputs...)
	for i := range 10 {
		o := cur.Outputs[i]
		o.Path = fmt.Sprintf("new/file%d.bin", i)
		next.Outputs = append(next.Outputs, o)
	}
	next.Sort()
	return next
}

// TestMarshalToInParallelIsMarshal: from 4,096 records MarshalTo encodes
// chunks of 1,024 on several goroutines; its bytes are Marshal's for any
// mix of records copied as read and records encoded, at and around the
// chunk and size boundaries, and its error is Marshal's: the first
// invalid record's, a duplicate across two chunks included.
func TestMarshalToInParallelIsMarshal(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4095, 4096, 4097, 5120, 10_000} {
		data, err := catalog.Marshal(benchCat(n))
		if err != nil {
			t.Fatal(err)
		}
		cur, _, err := catalog.ParseOwned(data)
		if err != nil {
			t.Fatal(err)
		}
		next := cur.Successor()
		next.Outputs = append(next.Outputs, cur.Outputs...)
		for i := 0; i < n; i += 7 { // every 7th record changed: encoded again
			next.Outputs[i].Size++
		}
		next.Outputs[n-1].URL = "https://example.org/\u2028<&>" // escapes
		sameAsMarshal(t, fmt.Sprintf("records=%d", n), next)

		bad := func(edit func([]catalog.Output)) *catalog.Catalog {
			c := next.Successor()
			c.Outputs = append([]catalog.Output(nil), next.Outputs...)
			edit(c.Outputs)
			return c
		}
		for name, c := range map[string]*catalog.Catalog{
			"invalid digests in chunks 2 and 3": bad(func(o []catalog.Output) { o[2100].SHA256, o[3000].SHA256 = "x", "y" }),
			"duplicate across chunks":           bad(func(o []catalog.Output) { o[1024].Path = o[1023].Path }),
			"invalid in the last chunk":         bad(func(o []catalog.Output) { o[n-1].Kind = "other" }),
		} {
			sameAsMarshal(t, fmt.Sprintf("records=%d, %s", n, name), c)
		}
	}
}

// sameAsMarshal fails unless MarshalTo ends as Marshal does: the same
// bytes, or the same error.
func sameAsMarshal(t *testing.T, name string, c *catalog.Catalog) {
	t.Helper()
	want, werr := catalog.Marshal(c)
	var got bytes.Buffer
	gerr := catalog.MarshalTo(&got, c)
	switch {
	case werr != nil || gerr != nil:
		if werr == nil || gerr == nil || gerr.Error() != werr.Error() {
			t.Errorf("%s: MarshalTo error %v, Marshal error %v", name, gerr, werr)
		}
	case !bytes.Equal(got.Bytes(), want):
		t.Errorf("%s: MarshalTo wrote %d bytes that differ from Marshal's %d", name, got.Len(), len(want))
	}
}
