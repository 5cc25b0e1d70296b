package fakes3

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
)

// The listings this server answers itself are byte for byte gofakes3's,
// on the same backend; those it does not know are gofakes3's own answer.
func TestListingIsGofakes3s(t *testing.T) {
	t.Parallel()
	fast := New()
	plain := gofakes3.New(fast.Mem).Server()
	fastSrv, plainSrv := httptest.NewServer(fast), httptest.NewServer(plain)
	t.Cleanup(fastSrv.Close)
	t.Cleanup(plainSrv.Close)
	client := s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(fastSrv.URL), UsePathStyle: true})
	for _, b := range []string{"full", "empty", "odd"} {
		if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	// Keys encoding/xml escapes or leaves alone, and enough for pages.
	keys := []string{"a&b", "c<d>e", `q"uote`, "it's", "tab\tkey", "new\nline", "cr\rkey", "été/ü", "dir/x", "dir/y", "z~!*()"}
	for i := range 25 {
		keys = append(keys, fmt.Sprintf("p/%03d.bin", i))
	}
	for _, k := range keys {
		if _, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("full"), Key: aws.String(k),
			Body: strings.NewReader("body of " + k)}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}

	// Keys gofakes3 folds at "/" in its own way: its answer, not ours.
	for _, k := range []string{"x/", "a//b", "/lead", "plain"} {
		if _, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("odd"), Key: aws.String(k),
			Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	compare(t, fast, fastSrv.URL, plainSrv.URL, "/odd?delimiter=/", false)
	compare(t, fast, fastSrv.URL, plainSrv.URL, "/odd?list-type=2&delimiter=/&prefix=a", false)
	compare(t, fast, fastSrv.URL, plainSrv.URL, "/odd?list-type=2", true)
	// Follow the markers of a paged v1 listing with a delimiter.
	for marker, pages := "", 0; ; pages++ {
		body := compare(t, fast, fastSrv.URL, plainSrv.URL, "/full?delimiter=/&max-keys=3&marker="+marker, true)
		m := regexp.MustCompile(`<NextMarker>([^<]*)<`).FindSubmatch(body)
		if m == nil || !bytes.Contains(body, []byte("<IsTruncated>true<")) {
			break
		}
		marker = strings.ReplaceAll(string(m[1]), "/", "%2F")
		if pages > 10 {
			t.Fatal("more than 10 pages of 3")
		}
	}
	own := []string{
		// ListObjectsV2 and v1, with and without the delimiter "/".
		"/full?list-type=2&delimiter=/", "/full?list-type=2&delimiter=/&prefix=p/&max-keys=4",
		"/full?list-type=2&delimiter=/&max-keys=3", "/full?list-type=2&delimiter=/&prefix=d&max-keys=1",
		"/full?list-type=2&delimiter=/&prefix=p/0&start-after=p/010.bin&max-keys=5",
		"/full?delimiter=%2F&max-keys=1000&prefix=", "/full?delimiter=/&prefix=p/&max-keys=7&marker=p/003.bin",
		"/full?delimiter=/&prefix=dir/", "/full?delimiter=/&prefix=zzz", "/full?delimiter=/&max-keys=0",
		"/full?delimiter=/&max-keys=2&marker=dir/x", "/full?prefix=p/&marker=p/003.bin", "/full",
		"/full?max-keys=5", "/empty?delimiter=/",
		"/full?list-type=2", "/full?list-type=2&prefix=", "/full?list-type=2&prefix=p/&max-keys=10",
		"/full?list-type=2&max-keys=3&start-after=c%3Cd%3Ee", "/full?list-type=2&start-after=p/010.bin&max-keys=5&prefix=",
		"/full?list-type=2&prefix=nothing", "/full?list-type=2&max-keys=0", "/full?list-type=2&max-keys=5000",
		"/full?list-type=2&max-keys=-1", "/full?list-type=2&continuation-token=", "/empty?list-type=2&prefix=",
	}
	for _, q := range own {
		compare(t, fast, fastSrv.URL, plainSrv.URL, q, true)
	}
	// Follow the continuation tokens of a paged listing.
	next := "/full?list-type=2&prefix=&max-keys=7"
	for pages := 0; next != ""; pages++ {
		body := compare(t, fast, fastSrv.URL, plainSrv.URL, next, true)
		m := regexp.MustCompile(`<NextContinuationToken>([^<]*)<`).FindSubmatch(body)
		next = ""
		if m != nil && bytes.Contains(body, []byte("<IsTruncated>true<")) {
			next = "/full?list-type=2&prefix=&max-keys=7&continuation-token=" + string(m[1])
		}
		if pages > 10 {
			t.Fatal("more than 10 pages of 7 keys")
		}
	}
	theirs := []string{
		"/full?list-type=2&delimiter=-", "/full?list-type=2&fetch-owner=true", "/full?list-type=2&encoding-type=url",
		"/full?list-type=2&continuation-token=%21%21", "/full?list-type=2&max-keys=x", "/missing?list-type=2",
		"/missing?delimiter=/", "/full?list-type=1", "/full?delimiter=/&prefix=/x", "/full?location", "/full/a%26b",
	}
	for _, q := range theirs {
		compare(t, fast, fastSrv.URL, plainSrv.URL, q, false)
	}
}

// compare GETs query from both servers and wants the same status, content
// type and body; own says whether this package (not gofakes3) answered.
func compare(t *testing.T, fast *Server, fastURL, plainURL, query string, own bool) []byte {
	t.Helper()
	before := fast.requestID.Load()
	got, gotType, gotStatus := get(t, fastURL+query)
	if answered := fast.requestID.Load() != before; answered != own {
		t.Errorf("GET %s: answered here = %v, want %v", query, answered, own)
	}
	want, wantType, wantStatus := get(t, plainURL+query)
	if gotStatus != wantStatus || gotType != wantType || !bytes.Equal(got, want) {
		t.Errorf("GET %s:\n got %d %s\n%s\nwant %d %s\n%s", query, gotStatus, gotType, got, wantStatus, wantType, want)
	}
	return got
}

func get(t *testing.T, url string) (body []byte, contentType string, status int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body, resp.Header.Get("Content-Type"), resp.StatusCode
}

// BenchmarkListPage: a page of 1,000 keys through this server and
// through gofakes3's own encoder, on the same backend.
func BenchmarkListPage(b *testing.B) {
	s := New()
	if err := s.Mem.CreateBucket("b"); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		k := fmt.Sprintf("dir%02d/file%06d.bin", i%50, i)
		if _, err := s.Mem.PutObject("b", k, map[string]string{}, strings.NewReader(k), int64(len(k)), nil); err != nil {
			b.Fatal(err)
		}
	}
	for name, h := range map[string]http.Handler{"server=fakes3": s, "server=gofakes3": gofakes3.New(s.Mem).Server()} {
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/b?list-type=2&prefix=", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || w.Body.Len() < 100_000 {
					b.Fatalf("listing: %d, %d bytes", w.Code, w.Body.Len())
				}
			}
		})
	}
}

// A listing's times are written as encoding/xml's layout writes them.
func TestAppendTimeIsAppendFormat(t *testing.T) {
	t.Parallel()
	const layout = "2006-01-02T15:04:05.999Z"
	times := []time.Time{
		time.Date(2026, 12, 3, 16, 30, 4, 713942000, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 1_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999_999, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(999, 12, 31, 23, 59, 59, 10_000_000, time.UTC), time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		times = append(times, time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC())
	}
	for _, tm := range times {
		if got, want := string(appendTime([]byte("x"), tm)), "x"+tm.Format(layout); got != want {
			t.Fatalf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}
