package notify_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
)

// cloudFrontServer speaks CloudFront's CreateInvalidation: it answers the
// first quota calls with TooManyInvalidationsInProgress, then creates
// invalidations, one per CallerReference.
type cloudFrontServer struct {
	mu      sync.Mutex
	quota   int
	calls   int
	batches map[string][]string // CallerReference -> paths
	dist    string
}

type invalidationBatch struct {
	CallerReference string   `xml:"CallerReference"`
	Quantity        int      `xml:"Paths>Quantity"`
	Paths           []string `xml:"Paths>Items>Path"`
}

func (s *cloudFrontServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	want := "/2020-05-31/distribution/" + s.dist + "/invalidation"
	if r.Method != http.MethodPost || r.URL.Path != want || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
		return
	}
	if s.quota > 0 {
		s.quota--
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>TooManyInvalidationsInProgress</Code><Message>Processing your request will cause you to exceed the maximum number of in-progress wildcard invalidations.</Message></Error><RequestId>r1</RequestId></ErrorResponse>`)
		return
	}
	data, _ := io.ReadAll(r.Body)
	var b invalidationBatch
	if err := xml.Unmarshal(data, &b); err != nil || b.Quantity != len(b.Paths) {
		http.Error(w, "bad batch", http.StatusBadRequest)
		return
	}
	if _, ok := s.batches[b.CallerReference]; !ok {
		s.batches[b.CallerReference] = b.Paths
	}
	var items strings.Builder
	for _, p := range b.Paths {
		fmt.Fprintf(&items, "<Path>%s</Path>", p)
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Location", "https://cloudfront.amazonaws.com"+want+"/I1")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `<?xml version="1.0"?><Invalidation xmlns="http://cloudfront.amazonaws.com/doc/2020-05-31/"><Id>I1</Id><Status>InProgress</Status><CreateTime>2026-06-19T12:00:00Z</CreateTime><InvalidationBatch><Paths><Quantity>%d</Quantity><Items>%s</Items></Paths><CallerReference>%s</CallerReference></InvalidationBatch></Invalidation>`,
		len(b.Paths), items.String(), b.CallerReference)
}

// The invalidation names the changed paths under links.base_url's path,
// folded to max_paths with prefix wildcards, with the result id as
// CallerReference; the in-progress quota is waited out.
func TestCloudFrontInvalidation(t *testing.T) {
	t.Parallel()
	cf := &cloudFrontServer{quota: 2, batches: map[string][]string{}, dist: "E2TEST"}
	srv := httptest.NewServer(cf)
	t.Cleanup(srv.Close)
	d := config.Destination{ID: "site", Links: config.Links{BaseURL: "https://cdn.example.com/reports/"},
		Notify: []config.NotifyTarget{{Type: config.NotifyCloudFront, DistributionID: "E2TEST", Endpoint: srv.URL, MaxPaths: 4,
			On: []string{events.TypePublished}, Timeout: config.Duration(5 * time.Second), MaxAge: config.Duration(time.Hour)}}}
	opts := notify.Options{Backoff: 10 * time.Millisecond,
		CloudFront: notify.CloudFrontOptions{Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}}
	ts, err := notify.DestinationTargets(context.Background(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := published("ev1.site", "site")
	r.Outputs = []events.OutputRef{
		{Path: "index.html", Action: events.ActionWritten},
		{Path: "daily/a.html", Action: events.ActionWritten},
		{Path: "daily/b.html", Action: events.ActionUpdated},
		{Path: "daily/c.html", Action: events.ActionDeleted},
		{Path: "weekly/x.csv", Action: events.ActionWritten},
	}
	body, _ := r.Encode()
	n, err := notify.Deliver(context.Background(), ts[0], r, body, opts, nil)
	if err != nil || n != 3 {
		t.Fatalf("Deliver = %d attempts, %v; want 3 (two quota errors), nil", n, err)
	}
	got := cf.batches["ev1.site"]
	want := []string{"/reports/index.html", "/reports/", "/reports/weekly/x.csv", "/reports/daily/*"}
	if !slices.Equal(got, want) || len(cf.batches) != 1 {
		t.Errorf("invalidations %v, want CallerReference ev1.site with %v", cf.batches, want)
	}
	// A second delivery of the same result uses the same CallerReference.
	if _, err := notify.Deliver(context.Background(), ts[0], r, body, opts, nil); err != nil || len(cf.batches) != 1 {
		t.Errorf("again: %v, batches %v", err, cf.batches)
	}
}

func TestReducePaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		max  int
		want []string
	}{
		{[]string{"/a", "/b"}, 15, []string{"/a", "/b"}},
		{[]string{"/x/1", "/x/2", "/x/y/1", "/x/y/2", "/z"}, 3, []string{"/z", "/x/*"}},
		{[]string{"/x/1", "/x/y/1", "/x/y/2", "/z"}, 3, []string{"/x/1", "/z", "/x/y/*"}},
		{[]string{"/a/1", "/b/1", "/c/1"}, 2, []string{"/*"}},
		{[]string{"/a/1", "/a/2", "/b/1", "/b/2"}, 3, []string{"/b/1", "/b/2", "/a/*"}},
		{[]string{"/a/1", "/a/2", "/b/1", "/b/2"}, 1, []string{"/*"}},
	} {
		if got := notify.ReducePaths(tc.in, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("ReducePaths(%v, %d) = %v, want %v", tc.in, tc.max, got, tc.want)
		}
	}
}

// A result whose output list was cut invalidates the whole root.
func TestInvalidationPathsTruncated(t *testing.T) {
	t.Parallel()
	r := published("e", "d")
	r.OutputsTruncated = true
	if got := notify.InvalidationPaths("/r/", r, 15); !slices.Equal(got, []string{"/r/*"}) {
		t.Errorf("got %v", got)
	}
}
