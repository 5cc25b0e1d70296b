package events_test

import (
	"context"
	"testing"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// Prefixes that differ only in case or in '-' against '_' are tenants of
// their own on one NATS: each gets its own streams and lease bucket, and
// the events announced and reported under one are not in the other's.
func TestPrefixesDifferingInCaseOrSeparatorDoNotShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	for _, pair := range [][2]string{{"acme", "Acme"}, {"t-1", "t_1"}} {
		var streams [2]*events.Streams
		for i, p := range pair {
			st, err := events.Setup(ctx, js, events.SetupConfig{Subjects: events.Subjects{Prefix: p}})
			if err != nil {
				t.Fatalf("Setup %q: %v", p, err)
			}
			streams[i] = st
		}
		names := map[string]bool{}
		for _, st := range streams {
			for _, n := range []string{st.Bundles.CachedInfo().Config.Name, st.Events.CachedInfo().Config.Name, st.Leases.Bucket()} {
				if names[n] {
					t.Fatalf("%q and %q share %s", pair[0], pair[1], n)
				}
				names[n] = true
			}
		}

		// One bundle event and one result under the first prefix only.
		pub := events.NewPublisher(js, events.Subjects{Prefix: pair[0]})
		if _, _, err := pub.AnnounceBundle(ctx, events.BundleReady{PipelineID: "p", Bundle: "/b", ManifestDigest: digest}); err != nil {
			t.Fatal(err)
		}
		if _, err := pub.PublishResult(ctx, events.Result{Type: events.TypeFailed, BundleEventID: "e1", PipelineID: "p", Reason: events.ReasonInternal, Message: "m", Attempts: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := streams[0].Leases.Put(ctx, "root", []byte("holder")); err != nil {
			t.Fatal(err)
		}
		for i, want := range []uint64{1, 0} {
			b, err := streams[i].Bundles.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			e, err := streams[i].Events.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b.State.Msgs != want || e.State.Msgs != want {
				t.Errorf("prefix %q: %d bundle and %d result events, want %d each", pair[i], b.State.Msgs, e.State.Msgs, want)
			}
			_, err = streams[i].Leases.Get(ctx, "root")
			if got := err == nil; got != (want == 1) {
				t.Errorf("prefix %q: lease key there %v, want %v", pair[i], got, want == 1)
			}
		}
	}
}
