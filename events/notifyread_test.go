package events_test

import (
	"context"
	"testing"

	"github.com/distributor/distributor/events"
)

// ReadNotifyFailuresByDestination counts each destination's notify_failed
// events (of one pipeline, when given) and returns each one's newest; a
// give-up reported twice is stored once; destinations without any are
// absent; result events are not counted.
func TestReadNotifyFailuresByDestination(t *testing.T) {
	t.Parallel()
	js, st := setup(t)
	ctx := context.Background()
	pub := events.NewPublisher(js, st.Subjects)
	if _, err := pub.PublishResult(ctx, published("b0", "site", "p.one")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []events.NotifyFailed{
		{ResultID: "b1.site", ResultType: "published", PipelineID: "p.one", DestinationID: "site", Target: "hook", TargetType: "webhook", Attempts: 3, Message: "503"},
		{ResultID: "b1.site", ResultType: "published", PipelineID: "p.one", DestinationID: "site", Target: "hook", TargetType: "webhook", Attempts: 3, Message: "503"},
		{ResultID: "b2.site", ResultType: "published", PipelineID: "p.two", DestinationID: "site", Target: "cdn", TargetType: "cloudfront", Attempts: 5, Message: "quota"},
		{ResultID: "b3.docs", ResultType: "failed", PipelineID: "p.one", DestinationID: "docs", Target: "hook", TargetType: "webhook", Attempts: 1, Message: "refused"},
	} {
		if err := pub.PublishNotifyFailed(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	all, err := events.ReadNotifyFailuresByDestination(ctx, st.Events, st.Subjects, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all["site"].Count != 2 || all["site"].Last.ResultID != "b2.site" || all["site"].Last.Target != "cdn" ||
		all["docs"].Count != 1 || all["docs"].Last.ResultID != "b3.docs" {
		t.Errorf("all pipelines: %+v", all)
	}
	one, err := events.ReadNotifyFailuresByDestination(ctx, st.Events, st.Subjects, "p.one")
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 2 || one["site"].Count != 1 || one["site"].Last.ResultID != "b1.site" || one["docs"].Count != 1 {
		t.Errorf("pipeline p.one: %+v", one)
	}
	site, err := events.ReadNotifyFailures(ctx, st.Events, st.Subjects, "site")
	if err != nil || site.Count != 2 || site.Last.ResultID != "b2.site" {
		t.Errorf("ReadNotifyFailures(site): %+v, %v", site, err)
	}
}
