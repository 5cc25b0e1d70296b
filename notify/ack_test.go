package notify_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
	"github.com/distributor/distributor/testenv"
)

// A delivery whose acknowledgement NATS does not confirm is not silent:
// the target was called, and it may be called again with the same id,
// so serve says so on one line naming the result.
func TestUnconfirmedAcknowledgementIsLogged(t *testing.T) {
	t.Parallel()
	ns := testenv.NewNATS(t)
	pub := setup(t, ns.JetStream(t))
	proxy := testenv.NewFreezableProxy(t, ns.URL)
	nc, err := nats.Connect(proxy.URL, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	// The target answers 200, with NATS cut off from the runner until the
	// acknowledgement has timed out.
	called := make(chan string, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		proxy.Freeze()
		called <- req.Header.Get(notify.HeaderEventID)
	}))
	t.Cleanup(target.Close)
	dest := config.Destination{ID: "site", Notify: []config.NotifyTarget{{Type: config.NotifyWebhook, URL: target.URL, SecretEnv: "HOOK_SECRET",
		On: []string{events.TypePublished}, Timeout: config.Duration(2 * time.Second), MaxAge: config.Duration(time.Hour)}}}
	var logs testenv.SyncBuffer
	ts, err := notify.DestinationTargets(t.Context(), dest, notify.Options{LookupEnv: secretEnv("s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	r := &notify.Runner{JS: js, Subjects: events.Subjects{}, Publisher: events.NewPublisher(js, events.Subjects{}), Targets: ts, Log: zerolog.New(&logs)}
	done := make(chan struct{})
	go func() { r.Run(t.Context()); close(done) }()
	t.Cleanup(func() { proxy.Unfreeze(); <-done })
	waitConsumers(t, ns.JetStream(t), notify.ConsumerName(events.Subjects{}, "site", "webhook"))

	publishEventually(t, pub, published("ev1.site", "site"))
	select {
	case id := <-called:
		if id != "ev1.site" {
			t.Fatalf("the target was called with %q, want ev1.site", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the target was never called")
	}
	want := "notify: delivered, but NATS did not confirm it; the target may be called again with the same Distributor-Event-Id in up to 30s"
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no line %q; logs:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if line := logs.String(); !strings.Contains(line, `"result":"ev1.site"`) || !strings.Contains(line, `"level":"warn"`) {
		t.Errorf("the line does not name the result as a warning:\n%s", line)
	}
}
