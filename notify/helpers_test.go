package notify_test

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
)

// receiver is a webhook endpoint that checks each call's signature and
// counts the calls per Distributor-Event-Id.
type receiver struct {
	t      testing.TB
	secret []byte
	srv    *httptest.Server

	// fail answers this many calls with 503 before accepting.
	mu       sync.Mutex
	fail     int
	calls    map[string]int
	first    map[string]time.Time
	badSigns int
	arrived  chan string
}

func newReceiver(t testing.TB, secret string) *receiver {
	r := &receiver{t: t, secret: []byte(secret), calls: map[string]int{}, first: map[string]time.Time{}, arrived: make(chan string, 10000)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(notify.HeaderEventID)
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !hmac.Equal([]byte(req.Header.Get(notify.HeaderSignature)), []byte(notify.Sign(r.secret, body))) || ev.ID != id || req.Method != http.MethodPost {
		r.badSigns++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.fail > 0 {
		r.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.calls[id]++
	if r.calls[id] == 1 {
		r.first[id] = time.Now()
	}
	r.arrived <- id
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

// webhookDest is a destination with one signed webhook to r.
func webhookDest(id string, r *receiver, maxAge time.Duration) config.Destination {
	return config.Destination{ID: id, Notify: []config.NotifyTarget{{Type: config.NotifyWebhook, URL: r.srv.URL, SecretEnv: "HOOK_SECRET",
		On: []string{events.TypePublished}, Timeout: config.Duration(2 * time.Second), MaxAge: config.Duration(maxAge)}}}
}

func secretEnv(secret string) func(string) (string, bool) {
	return func(k string) (string, bool) { return secret, k == "HOOK_SECRET" }
}

// published is a published result of destination dest.
func published(id, dest string) events.Result {
	return events.Result{SchemaVersion: 1, Type: events.TypePublished, ID: id, Time: time.Now().UTC(), BundleEventID: strings.TrimSuffix(id, "."+dest), PipelineID: "p", DestinationID: dest,
		Attempts: 1, Written: 1, Outputs: []events.OutputRef{{Path: "a/b.html", SHA256: "sha256:" + strings.Repeat("0", 64), Size: 1, Action: events.ActionWritten}}}
}
