package main

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// hookReceiver is a webhook endpoint that checks each call's signature
// and that its Distributor-Event-Id is the body's id, and counts the
// accepted calls per id. While down it answers 503.
type hookReceiver struct {
	secret []byte
	srv    *httptest.Server

	mu       sync.Mutex
	down     bool
	calls    map[string]int
	first    map[string]time.Time
	refused  int
	badCalls int
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	t.Helper()
	r := &hookReceiver{secret: []byte(secret), calls: map[string]int{}, first: map[string]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(notify.HeaderEventID)
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !hmac.Equal([]byte(req.Header.Get(notify.HeaderSignature)), []byte(notify.Sign(r.secret, body))) || ev.ID != id:
		r.badCalls++
		w.WriteHeader(http.StatusUnauthorized)
	case r.down:
		r.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		r.calls[id]++
		if r.calls[id] == 1 {
			r.first[id] = time.Now()
		}
	}
}

func (r *hookReceiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// snapshot copies the accepted calls per id.
func (r *hookReceiver) snapshot() (calls map[string]int, refused, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.calls), r.refused, r.badCalls
}

// firstCall is when id was first accepted.
func (r *hookReceiver) firstCall(id string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first[id]
}

// addWebhook gives destination d of the environment a webhook to r whose
// deliveries are given up after maxAge.
func (e *natsEnv) addWebhook(t *testing.T, d string, r *hookReceiver, secretEnv, maxAge string) {
	t.Helper()
	data, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	line := "    path: " + e.roots[d] + "\n"
	hook := "    notify:\n      - {type: webhook, name: hook, url: '" + r.srv.URL + "', secret_env: " + secretEnv + ", timeout: 2s, max_age: " + maxAge + "}\n"
	if !strings.Contains(string(data), line) {
		t.Fatalf("no destination %s in %s", d, data)
	}
	if err := os.WriteFile(e.cfg, []byte(strings.Replace(string(data), line, line+hook, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// givenUpWebhook runs serve (status page on addr) with a webhook on d1
// that is down: one publication to p.one is given up after max_age. It
// returns the environment, the receiver and d1's published result.
func givenUpWebhook(t *testing.T, addr string) (*natsEnv, *hookReceiver, events.Result) {
	t.Helper()
	t.Setenv("NOTIFY_STATUS_SECRET", "s3cret")
	e := newNATSEnv(t)
	rcv := newHookReceiver(t, "s3cret")
	rcv.setDown(true)
	e.addWebhook(t, "d1", rcv, "NOTIFY_STATUS_SECRET", "1s")
	startServe(t, e.cfg, "--http-addr", addr)
	b := e.makeBundle(t, "b1", "src.one", bundleOne)
	if code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b); code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", code, stdout, stderr)
	}
	res := e.waitEvent(t, func(r events.Result) bool { return r.Type == events.TypePublished && r.DestinationID == "d1" })
	st, err := e.nats.JetStream(t).Stream(t.Context(), events.Subjects{}.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		f, err := events.ReadNotifyFailures(t.Context(), st, events.Subjects{}, "d1")
		return err == nil && f.Count == 1
	}, "the webhook of d1 to give up")
	return e, rcv, res
}

// A delivery given up is shown by status (text and --json), history (text
// and --json) and the status page: how many, and the newest with its
// target, result id, message, time and the replay command. Other
// destinations show none.
func TestStatusAndHistoryShowNotifyFailures(t *testing.T) {
	addr := testenv.FreeAddr(t)
	e, _, res := givenUpWebhook(t, addr)
	replay := "distributor notify replay --id " + res.ID + " --target hook"
	schemas := schematest.New(t)

	code, stdout, stderr := e.cmd(t, "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	if err := schemas.Validate(t, "cli-status.json", []byte(stdout)); err != nil {
		t.Errorf("status --json against cli-status.json: %v\n%s", err, stdout)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Destinations {
		f := d.NotifyFailures
		if d.DestinationID != "d1" {
			if f != nil {
				t.Errorf("%s: notify failures %+v, want none", d.DestinationID, f)
			}
			continue
		}
		if f == nil || f.Count != 1 || f.Last == nil {
			t.Fatalf("d1: notify failures %+v, want one", f)
		}
		l := f.Last
		if l.ResultID != res.ID || l.ResultType != events.TypePublished || l.PipelineID != "p.one" || l.Target != "hook" || l.TargetType != "webhook" ||
			l.EventID != events.NotifyFailedID(res.ID, "hook") || l.Attempts < 1 || !strings.Contains(l.Message, "503 Service Unavailable") ||
			l.Replay != replay || l.Time.Before(res.Time) {
			t.Errorf("d1: newest notify failure %+v", *l)
		}
	}

	code, stdout, stderr = e.cmd(t, "status", "--destination", "d1")
	if code != 0 || !strings.Contains(stdout, "1 notify failed") ||
		!strings.Contains(stdout, "  notify failures: 1 in the events stream; newest ") ||
		!strings.Contains(stdout, "webhook target hook gave up on published result "+res.ID+" after ") ||
		!strings.Contains(stdout, "503 Service Unavailable; send it again: "+replay+"\n") {
		t.Errorf("status: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = e.cmd(t, "history", "--destination", "d1", "--json")
	if err := schemas.Validate(t, "cli-history.json", []byte(stdout)); code != 0 || err != nil {
		t.Errorf("history --json: exit %d, schema: %v\n%s%s", code, err, stdout, stderr)
	}
	var h historyJSON
	if err := json.Unmarshal([]byte(stdout), &h); err != nil || h.NotifyFailures == nil || h.NotifyFailures.Count != 1 || h.NotifyFailures.Last.Replay != replay {
		t.Errorf("history --json: notify failures %+v (%v)", h.NotifyFailures, err)
	}
	code, stdout, _ = e.cmd(t, "history", "--destination", "d1")
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || !strings.HasPrefix(lines[len(lines)-1], "notify failures: 1 in the events stream; newest ") {
		t.Errorf("history: exit %d, last line not the notify failures:\n%s", code, stdout)
	}
	if _, stdout, _ = e.cmd(t, "history", "--destination", "d2"); strings.Contains(stdout, "notify failures") {
		t.Errorf("history of d2 shows notify failures:\n%s", stdout)
	}

	_, page := waitGet(t, "http://"+addr+"/", func(c int, b string) bool { return c == http.StatusOK && strings.Contains(b, "notify failures") },
		"the notify failure on the status page")
	d1 := section(t, page, "d1")
	for _, want := range []string{">1 notify failed</span>", "<dt>notify failures</dt>", "gave up on published result <code>" + res.ID + "</code>",
		"<code>" + replay + "</code>"} {
		if !strings.Contains(d1, want) {
			t.Errorf("d1 on the status page lacks %q:\n%s", want, d1)
		}
	}
	if strings.Contains(section(t, page, "d2"), "notify") {
		t.Errorf("d2 on the status page shows notify failures")
	}
}

// A result given up is sent again by notify replay once the receiver is
// back: one call, with the result's own id, and none to the other
// destination's results.
func TestNotifyReplayAfterGiveUp(t *testing.T) {
	e, rcv, res := givenUpWebhook(t, "off")
	if calls, refused, bad := rcv.snapshot(); len(calls) != 0 || refused < 1 || bad != 0 {
		t.Fatalf("while down: calls %v, %d refused, %d with a bad signature", calls, refused, bad)
	}
	rcv.setDown(false)
	time.Sleep(time.Second) // serve does not try it again by itself
	if calls, _, _ := rcv.snapshot(); len(calls) != 0 {
		t.Fatalf("serve sent the given-up result again by itself: %v", calls)
	}
	code, stdout, stderr := e.cmd(t, "notify", "replay", "--id", res.ID)
	if code != 0 || stdout != "d1: delivered "+res.ID+" to hook\n" {
		t.Fatalf("notify replay: exit %d\n%s%s", code, stdout, stderr)
	}
	time.Sleep(500 * time.Millisecond)
	if calls, _, bad := rcv.snapshot(); len(calls) != 1 || calls[res.ID] != 1 || bad != 0 {
		t.Errorf("after replay: calls %v (%d with a bad signature), want one call of %s", calls, bad, res.ID)
	}
}
