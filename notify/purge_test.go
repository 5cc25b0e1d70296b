package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
)

// Purge sends one request per changed URL with the configured method,
// never more than concurrency at once.
func TestPurge(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	var now, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get(notify.HeaderEventID))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	d := config.Destination{ID: "site", Links: config.Links{BaseURL: srv.URL + "/r/"},
		Notify: []config.NotifyTarget{{Type: config.NotifyPurge, Method: "BAN", Concurrency: 2,
			On: []string{events.TypePublished}, Timeout: config.Duration(5 * time.Second), MaxAge: config.Duration(time.Hour)}}}
	ts, err := notify.DestinationTargets(context.Background(), d, notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := published("ev1.site", "site")
	r.Outputs = []events.OutputRef{{Path: "a.html", Action: events.ActionWritten}, {Path: "b.html", Action: events.ActionDeleted},
		{Path: "c.html", Action: events.ActionUpdated}, {Path: "docs/index.html", Action: events.ActionWritten}}
	if err := ts[0].Attempt(context.Background(), r, nil); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"BAN /r/a.html ev1.site", "BAN /r/b.html ev1.site", "BAN /r/c.html ev1.site", "BAN /r/docs/ ev1.site", "BAN /r/docs/index.html ev1.site"}
	if !slices.Equal(got, want) || peak.Load() > 2 {
		t.Errorf("requests %v (at most %d at once), want %v (at most 2)", got, peak.Load(), want)
	}
}
