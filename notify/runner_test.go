package notify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// runner starts a Runner for dests on js; stop ends it and waits.
func startRunner(t testing.TB, js jetstream.JetStream, dests []config.Destination, opts notify.Options) (stop func()) {
	t.Helper()
	var targets []*notify.Target
	for _, d := range dests {
		ts, err := notify.DestinationTargets(context.Background(), d, opts)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, ts...)
	}
	s := events.Subjects{}
	r := &notify.Runner{JS: js, Subjects: s, Publisher: events.NewPublisher(js, s), Targets: targets, Options: opts, Log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func setup(t testing.TB, js jetstream.JetStream) *events.Publisher {
	t.Helper()
	if _, err := events.Setup(context.Background(), js, events.SetupConfig{Subjects: events.Subjects{}}); err != nil {
		t.Fatal(err)
	}
	return events.NewPublisher(js, events.Subjects{})
}

// waitConsumers waits until the runner created its durables, so that a
// result published next is theirs (they start at new results).
func waitConsumers(t testing.TB, js jetstream.JetStream, names ...string) {
	t.Helper()
	for _, n := range names {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := js.Consumer(context.Background(), events.Subjects{}.EventsStream(), n)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumer %s: %v", n, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Every published result reaches the receiver at least once, with its
// id, while the runner (serve's delivery) is stopped and started again
// and NATS is killed with SIGKILL and restarted on its store. Scale for
// CI: 40 results, 3 kills of NATS and 3 restarts of the runner, under
// ~20 s.
func TestRunnerSurvivesRestarts(t *testing.T) {
	t.Parallel()
	ns := testenv.NewNATSProcess(t)
	js := ns.JetStream(t)
	pub := setup(t, js)
	rcv := newReceiver(t, "s3cret")
	opts := notify.Options{Backoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, LookupEnv: secretEnv("s3cret")}
	dests := []config.Destination{webhookDest("site", rcv, time.Hour)}
	stop := startRunner(t, ns.JetStream(t), dests, opts)
	waitConsumers(t, js, notify.ConsumerName(events.Subjects{}, "site", "webhook"))

	const n, kills = 40, 3
	var ids []string
	for i := range n {
		id := fmt.Sprintf("ev%d.site", i)
		ids = append(ids, id)
		publishEventually(t, pub, published(id, "site"))
		switch {
		case i%(n/kills) == 3:
			ns.Kill()
			time.Sleep(100 * time.Millisecond)
			ns.Start()
		case i%(n/kills) == 7:
			stop()
			stop = startRunner(t, ns.JetStream(t), dests, opts)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for rcv.count(id) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("result %s never arrived; calls %v", id, rcv.calls)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rcv.badSigns != 0 {
		t.Errorf("%d calls with a bad signature", rcv.badSigns)
	}
	var repeated []string
	for id, c := range rcv.calls {
		if c > 1 {
			repeated = append(repeated, id)
		}
	}
	t.Logf("%d results delivered, %d of them more than once (around a kill): %v", n, len(repeated), repeated)
}

// publishEventually publishes r, retrying while NATS restarts.
func publishEventually(t testing.TB, pub *events.Publisher, r events.Result) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := pub.PublishResult(ctx, r)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", r.ID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A receiver that hangs holds up only its own target: the results of
// another destination keep arriving at once, and publishing results is
// not slowed.
func TestHangingReceiverDoesNotSlowOthers(t *testing.T) {
	t.Parallel()
	js := testenv.NewNATS(t).JetStream(t)
	pub := setup(t, js)
	hang := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hung.Close)
	rcv := newReceiver(t, "s3cret")
	slow := config.Destination{ID: "slow", Notify: []config.NotifyTarget{{Type: config.NotifyWebhook, URL: hung.URL,
		On: []string{events.TypePublished}, Timeout: config.Duration(60 * time.Second), MaxAge: config.Duration(time.Hour)}}}
	opts := notify.Options{LookupEnv: secretEnv("s3cret")}
	startRunner(t, js, []config.Destination{slow, webhookDest("fast", rcv, time.Hour)}, opts)
	t.Cleanup(func() { close(hang) }) // before the runner stops: its attempts end
	waitConsumers(t, js, notify.ConsumerName(events.Subjects{}, "slow", "webhook"), notify.ConsumerName(events.Subjects{}, "fast", "webhook"))

	for i := range 20 { // more than the slow target's workers
		publishEventually(t, pub, published(fmt.Sprintf("s%d.slow", i), "slow"))
	}
	var worst time.Duration
	for i := range 10 {
		id := fmt.Sprintf("f%d.fast", i)
		start := time.Now()
		publishEventually(t, pub, published(id, "fast"))
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("publishing %s took %s", id, d)
		}
		select {
		case <-rcv.arrived:
		case <-time.After(3 * time.Second):
			t.Fatalf("result %s of the fast destination did not arrive while the slow receiver hangs", id)
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("slowest published→call of the fast destination: %s", worst)
}

// A delivery that keeps failing past max_age is given up as a
// notify_failed event that matches its schema; the result is not tried
// again.
func TestRunnerGivesUpWithNotifyFailed(t *testing.T) {
	t.Parallel()
	js := testenv.NewNATS(t).JetStream(t)
	pub := setup(t, js)
	rcv := newReceiver(t, "right")
	opts := notify.Options{Backoff: 50 * time.Millisecond, LookupEnv: secretEnv("wrong")}
	startRunner(t, js, []config.Destination{webhookDest("site", rcv, 500*time.Millisecond)}, opts)
	waitConsumers(t, js, notify.ConsumerName(events.Subjects{}, "site", "webhook"))
	publishEventually(t, pub, published("ev1.site", "site"))

	st, err := js.Stream(context.Background(), events.Subjects{}.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	var f events.NotifyFailures
	for deadline := time.Now().Add(10 * time.Second); f.Count == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f, err = events.ReadNotifyFailures(context.Background(), st, events.Subjects{}, "site"); err != nil {
			t.Fatal(err)
		}
	}
	if f.Count != 1 || f.Last == nil || f.Last.ResultID != "ev1.site" || f.Last.Target != "webhook" || f.Last.Attempts < 2 ||
		!slices.Contains([]string{"POST " + rcv.srv.URL + " answered 401 Unauthorized"}, trimNotify(f.Last.Message)) {
		t.Fatalf("notify failures %+v, last %+v", f, f.Last)
	}
	tried := rcv.badSigns
	time.Sleep(300 * time.Millisecond)
	if rcv.badSigns != tried {
		t.Errorf("the result was tried again after the give-up (%d → %d attempts)", tried, rcv.badSigns)
	}
	schematest.New(t).CheckEventsStream(t, js, events.Subjects{})
}

func trimNotify(msg string) string {
	const p = "notify webhook of site: "
	if len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// BenchmarkPublishedToCall measures from a published result stored on
// NATS to the webhook's call; it reports the p95.
func BenchmarkPublishedToCall(b *testing.B) {
	js := testenv.NewNATS(b).JetStream(b)
	pub := setup(b, js)
	rcv := newReceiver(b, "s3cret")
	startRunner(b, js, []config.Destination{webhookDest("site", rcv, time.Hour)}, notify.Options{LookupEnv: secretEnv("s3cret")})
	waitConsumers(b, js, notify.ConsumerName(events.Subjects{}, "site", "webhook"))
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		publishEventually(b, pub, published(fmt.Sprintf("b%d.site", i), "site"))
		<-rcv.arrived
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
