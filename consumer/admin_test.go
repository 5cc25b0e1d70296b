package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

const siteYAML = `
pipelines:
  - id: weather.daily
    destinations: [site]
destinations:
  - id: site
    backend: local
    path: @site@
`

// unmanaged writes a file distributor does not manage into the site root.
func (e *env) unmanaged(path, content string) string {
	e.t.Helper()
	name := filepath.Join(e.roots["site"], filepath.FromSlash(path))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// publishRaw puts ev on subject the way any NATS client could, bypassing
// the producer API's own refusal of operator flags.
func (e *env) publishRaw(subject string, ev events.BundleReady) {
	e.t.Helper()
	ev.SchemaVersion, ev.Type, ev.ProducedAt = events.SchemaVersion, events.TypeBundleReady, time.Now().UTC()
	data, err := ev.Encode()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.js.Publish(e.ctx, subject, data, jetstream.WithMsgID(ev.ID)); err != nil {
		e.t.Fatal(err)
	}
}

// Rule: a bundle-ready event on the producer subject that carries an
// operator flag (take_ownership, allow_older) gets exactly one
// failed/invalid_event result naming the admin subject, is not retried and
// writes nothing; the same request on the admin subject adopts. A durable
// made by an older serve (one filter subject) is updated to consume both.
func TestRuleOperatorFlagsOnlyOnAdminSubject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, siteYAML, false)
	subj := e.streams.Subjects
	if _, err := e.js.CreateOrUpdateConsumer(e.ctx, subj.BundlesStream(), jetstream.ConsumerConfig{
		Durable: subj.Durable(), FilterSubject: subj.BundleReadyFilter(""), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 2 * time.Second, MaxDeliver: 20, MaxAckPending: 1000, DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	e.start(nodeConfig{opts: fastOptions()})
	cons, err := e.js.Consumer(e.ctx, subj.BundlesStream(), subj.Durable())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"distributor.bundle.ready.>", "distributor.admin.bundle.ready.>"}
	if c := cons.CachedInfo().Config; !slices.Equal(c.FilterSubjects, want) || c.FilterSubject != "" {
		t.Fatalf("durable filters %q / %q, want %q", c.FilterSubjects, c.FilterSubject, want)
	}

	files := map[string]string{"report.md": "# Tomorrow\n", "data.csv": "t,1\n"}
	loc, digest := e.bundle("weather.tomorrow", files)
	stray := e.unmanaged("report.md", "hand-made")
	site := localRoot(t, e.roots["site"])

	for _, c := range []struct {
		flags string
		ev    events.BundleReady
	}{
		{"take_ownership", events.BundleReady{ID: "prod-take", TakeOwnership: true}},
		{"allow_older", events.BundleReady{ID: "prod-older", AllowOlder: true}},
		{"take_ownership and allow_older", events.BundleReady{ID: "prod-both", TakeOwnership: true, AllowOlder: true}},
	} {
		ev := c.ev
		ev.PipelineID, ev.Bundle, ev.ManifestDigest = "weather.daily", loc, digest
		e.publishRaw(subj.BundleReady(ev.PipelineID), ev)
		res := e.wait(ev.ID, 1, 20*time.Second)
		r := res[0]
		msg := fmt.Sprintf("bundle.ready %s on distributor.bundle.ready.weather.daily asks for %s: operator flags are accepted only on the admin subject distributor.admin.bundle.ready.weather.daily (distributor replay --take-ownership or --allow-older)", ev.ID, c.flags)
		if len(res) != 1 || r.Type != events.TypeFailed || r.Reason != events.ReasonInvalidEvent || r.Message != msg ||
			r.ID != ev.ID+"._" || r.DestinationID != "" || r.PipelineID != "weather.daily" || r.Attempts != 1 || r.Written != 0 {
			t.Fatalf("%s: %d result(s), first %+v\nwant one failed/invalid_event with message %q", ev.ID, len(res), r, msg)
		}
		if r.Original == nil || r.Original.ID != ev.ID || r.Original.TakeOwnership != ev.TakeOwnership || r.Original.AllowOlder != ev.AllowOlder {
			t.Errorf("%s: original %+v, want the rejected event (for an operator's replay)", ev.ID, r.Original)
		}
	}
	info := e.settled(5 * time.Second)
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 3 {
		t.Errorf("durable: %d redelivered, %d delivered; want 0 and 3 (terminated, not retried)", info.NumRedelivered, info.Delivered.Consumer)
	}
	if data, err := os.ReadFile(stray); err != nil || string(data) != "hand-made" {
		t.Fatalf("unmanaged report.md = %q, %v after rejected events; want it untouched", data, err)
	}
	if data, _, err := site.ReadVersion(e.ctx, catalog.FileName); err != nil || data != nil {
		t.Fatalf("catalog after rejected events: %q, %v; want none", data, err)
	}
	if got := len(e.results.all()); got != 3 {
		t.Errorf("%d result events, want 3", got)
	}

	// The same request from an operator, on the admin subject, adopts.
	op := events.BundleReady{ID: "op-take", PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, TakeOwnership: true, ReplayOf: "prod-take"}
	if _, _, err := e.pub.AnnounceAsOperator(e.ctx, op); err != nil {
		t.Fatal(err)
	}
	res := e.wait(op.ID, 1, 20*time.Second)
	checkAdopted(t, res, op.ID, []string{"report.md"}, 2)
	if data, _ := os.ReadFile(stray); string(data) != files["report.md"] {
		t.Errorf("adopted report.md = %q, want the bundle's bytes", data)
	}
	checkFiles(t, site, map[string]string{catalog.FileName: "", "report.md": digestOf(files["report.md"]), "data.csv": digestOf(files["data.csv"])})
	e.checkNoBadEvents()
}

func checkAdopted(t *testing.T, res []events.Result, id string, adopted []string, written int) {
	t.Helper()
	if len(res) != 1 {
		t.Fatalf("%s: %d results, want 1", id, len(res))
	}
	r := res[0]
	if r.Type != events.TypePublished || r.DestinationID != "site" || !slices.Equal(r.Adopted, adopted) || r.Written != written {
		t.Fatalf("%s: %s dest %q adopted %v written %d (%s %s); want published site, adopted %v, written %d",
			id, r.Type, r.DestinationID, r.Adopted, r.Written, r.Reason, r.Message, adopted, written)
	}
}

// docPipeline is the pipeline of the weather producer's set in
// docs/nats-permissions.md.
const docPipeline = "weatherreporter.daily"

// TestNATSPermissionsDoc runs every role of docs/nats-permissions.md with
// exactly its documented permissions. The producer announces (published)
// but its attempt on the admin subject is refused by the server and never
// reaches the stream; serve sets up and publishes; the operator's
// take_ownership request adopts; downstream reads the results.
func TestNATSPermissionsDoc(t *testing.T) {
	t.Parallel()
	// The env's own connection (setup checks, result collector) is a user
	// without limits; every role below uses only its documented set.
	n := testenv.NewNATSWithUsers(t, append([]*server.User{{Username: "test", Password: "test"}}, testenv.NATSUsersFromDoc(t, "../docs/nats-permissions.md")...))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	setupCfg := events.SetupConfig{Storage: jetstream.MemoryStorage}
	jsAs := func(user string, opts ...nats.Option) jetstream.JetStream {
		js, err := jetstream.New(n.ConnAs(t, user, opts...))
		if err != nil {
			t.Fatal(err)
		}
		return js
	}

	// serve creates the streams, then finds them (update) on restart.
	serveJS := jsAs("serve")
	for i := range 2 {
		if _, err := events.Setup(ctx, serveJS, setupCfg); err != nil {
			t.Fatalf("serve: Setup #%d: %v", i+1, err)
		}
	}
	e := newEnvOn(t, n, strings.ReplaceAll(siteYAML, "weather.daily", docPipeline), false)
	subj := e.streams.Subjects
	e.start(nodeConfig{user: "serve", opts: fastOptions()})

	// Downstream listens live from here on.
	downJS := jsAs("downstream")
	downNC := n.ConnAs(t, "downstream")
	live, err := downNC.SubscribeSync(subj.ResultFilter("", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	// The server has the subscription once a flush returns; without it a
	// busy machine published the first result before it did.
	if err := downNC.Flush(); err != nil {
		t.Fatal(err)
	}

	// Producer: its announcement is published.
	var mu sync.Mutex
	var async []error
	prodJS := jsAs("weather-producer", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		defer mu.Unlock()
		async = append(async, err)
	}))
	prod := events.NewPublisher(prodJS, subj)
	loc1, digest1 := e.bundle("weather.today", map[string]string{"today.csv": "t,0\n"})
	if _, _, err := prod.AnnounceBundle(ctx, events.BundleReady{ID: "prod-1", PipelineID: docPipeline, Bundle: loc1, ManifestDigest: digest1}); err != nil {
		t.Fatalf("producer: announce: %v", err)
	}
	if r := e.wait("prod-1", 1, 20*time.Second)[0]; r.Type != events.TypePublished || r.Written != 1 {
		t.Fatalf("producer's announcement: %s written %d (%s %s), want published, 1 written", r.Type, r.Written, r.Reason, r.Message)
	}

	// Producer: an adoption request on the admin subject is refused by the
	// server: no ack, nothing stored, nothing adopted.
	files := map[string]string{"report.md": "# Tomorrow\n"}
	loc2, digest2 := e.bundle("weather.tomorrow", files)
	stray := e.unmanaged("report.md", "hand-made")
	adopt := events.BundleReady{ID: "prod-admin", PipelineID: docPipeline, Bundle: loc2, ManifestDigest: digest2, TakeOwnership: true}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, _, err = prod.AnnounceAsOperator(pctx, adopt)
	pcancel()
	if err == nil {
		t.Fatal("producer: publish on the admin subject was acknowledged")
	}
	mu.Lock()
	violation := slices.ContainsFunc(async, func(err error) bool {
		return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"distributor.admin.bundle.ready.`+docPipeline+`"`)
	})
	mu.Unlock()
	if !violation {
		t.Errorf("producer: publish error %v, async errors %v; want a permissions violation for the admin subject", err, async)
	}
	if _, err := e.streams.Bundles.GetLastMsgForSubject(ctx, subj.AdminBundleReadyFilter("")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("admin subject in the stream: err = %v, want nothing stored", err)
	}
	if info, _ := e.streams.Bundles.Info(ctx); info.State.Msgs != 1 {
		t.Errorf("bundles stream holds %d messages, want only the producer's announcement", info.State.Msgs)
	}

	// Operator: sets up like every CLI command, then the same request on
	// the admin subject adopts.
	opJS := jsAs("operator")
	if _, err := events.Setup(ctx, opJS, setupCfg); err != nil {
		t.Fatalf("operator: Setup: %v", err)
	}
	adopt.ID = "op-admin"
	if _, _, err := events.NewPublisher(opJS, subj).AnnounceAsOperator(ctx, adopt); err != nil {
		t.Fatalf("operator: announce on the admin subject: %v", err)
	}
	checkAdopted(t, e.wait("op-admin", 1, 20*time.Second), "op-admin", []string{"report.md"}, 1)
	if data, _ := os.ReadFile(stray); string(data) != files["report.md"] {
		t.Errorf("adopted report.md = %q, want the bundle's bytes", data)
	}
	if got := readResultsAs(t, ctx, opJS, subj); !slices.Equal(got, []string{"prod-1 published", "op-admin published"}) {
		t.Errorf("operator: read %v from the events stream", got)
	}

	// Downstream: reads the stream and the live subject.
	if got := readResultsAs(t, ctx, downJS, subj); !slices.Equal(got, []string{"prod-1 published", "op-admin published"}) {
		t.Errorf("downstream: read %v from the events stream", got)
	}
	var seen []string
	for range 2 {
		m, err := live.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("downstream: live result events: %v", err)
		}
		r, err := events.DecodeResult(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, r.BundleEventID+" "+r.Type)
	}
	if !slices.Equal(seen, []string{"prod-1 published", "op-admin published"}) {
		t.Errorf("downstream: live %v", seen)
	}
	e.checkNoBadEvents()
}

// readResultsAs reads every stored result event through an ordered consumer,
// as `distributor events tail` and downstream readers do.
func readResultsAs(t *testing.T, ctx context.Context, js jetstream.JetStream, subj events.Subjects) []string {
	t.Helper()
	oc, err := js.OrderedConsumer(ctx, subj.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj.ResultFilter("", "", "")}})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", subj.EventsStream(), err)
	}
	batch, err := oc.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for m := range batch.Messages() {
		r, err := events.DecodeResult(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.BundleEventID+" "+r.Type)
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}
