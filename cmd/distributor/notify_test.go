package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
)

// apply without NATS tells the destination's webhook after the
// publication: the published result as the body, its id in
// Distributor-Event-Id and the body's signature.
func TestApplyNotifiesWebhookInline(t *testing.T) {
	t.Setenv("NOTIFY_TEST_SECRET", "s3cret")
	var mu sync.Mutex
	var got []events.Result
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(notify.HeaderSignature) != notify.Sign([]byte("s3cret"), body) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var res events.Result
		_ = json.Unmarshal(body, &res)
		if res.ID != r.Header.Get(notify.HeaderEventID) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, res)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(e.cfg, string(cfg)+"    notify:\n      - {type: webhook, url: "+srv.URL+", secret_env: NOTIFY_TEST_SECRET}\n")
	b := e.bundle("b", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n"})
	e.apply(pipeDaily, b)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Type != events.TypePublished || got[0].DestinationID != "latest" || !strings.HasSuffix(got[0].ID, ".latest") ||
		len(got[0].Outputs) != 1 || got[0].Outputs[0].Path != "report.md" {
		t.Fatalf("webhook got %+v, want one published result of latest naming report.md", got)
	}
}

// A webhook whose secret variable is not set stops apply before it
// publishes, with one line naming the variable.
func TestApplyRefusesMissingSecret(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "additive"})
	cfg, _ := os.ReadFile(e.cfg)
	e.writeFile(e.cfg, string(cfg)+"    notify:\n      - {type: webhook, url: 'http://127.0.0.1:1/', secret_env: NOTIFY_TEST_UNSET_SECRET}\n")
	b := e.bundle("b", "weatherreporter.tomorrow", map[string]string{"report.md": "# Tomorrow\n"})
	_, stderr, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir)
	if code == 0 || !strings.Contains(stderr, "secret_env NOTIFY_TEST_UNSET_SECRET is not set in the environment") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(root + "/report.md"); !os.IsNotExist(err) {
		t.Errorf("apply published despite the missing secret: %v", err)
	}
}
