package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// History reads one destination's results (of one pipeline, when asked),
// newest first, at most the limit; Open finds the streams without
// creating them.
func TestHistoryNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	if _, err := events.Open(ctx, js, events.Subjects{}); !errors.Is(err, events.ErrNoStreams) {
		t.Fatalf("Open before Setup: %v, want ErrNoStreams", err)
	}
	if _, err := events.Setup(ctx, js, events.SetupConfig{}); err != nil {
		t.Fatal(err)
	}
	st, err := events.Open(ctx, js, events.Subjects{})
	if err != nil || st.Events == nil || st.Bundles == nil || st.Leases == nil {
		t.Fatalf("Open: %+v, %v", st, err)
	}
	if h, err := events.History(ctx, st.Events, st.Subjects, "site", "", 0); err != nil || len(h) != 0 {
		t.Fatalf("empty stream: %v, %v", h, err)
	}
	p := events.NewPublisher(js, st.Subjects)
	for i := range 5 {
		pipeline := "w.daily"
		if i%2 == 1 {
			pipeline = "t.hourly"
		}
		for _, dest := range []string{"site", "other"} {
			if _, err := p.PublishResult(ctx, published(fmt.Sprintf("e%d", i), dest, pipeline)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Undecodable messages are skipped.
	if _, err := js.Publish(ctx, st.Subjects.Result(events.TypePublished, "site", "w.daily"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	ids := func(h []events.Stored) []string {
		var out []string
		for _, r := range h {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		pipeline string
		limit    int
		want     []string
	}{
		{"", 0, []string{"e4.site", "e3.site", "e2.site", "e1.site", "e0.site"}},
		{"", 2, []string{"e4.site", "e3.site"}},
		{"w.daily", 0, []string{"e4.site", "e2.site", "e0.site"}},
		{"t.hourly", 1, []string{"e3.site"}},
		{"", 9, []string{"e4.site", "e3.site", "e2.site", "e1.site", "e0.site"}},
	} {
		h, err := events.History(ctx, st.Events, st.Subjects, "site", c.pipeline, c.limit)
		if err != nil || !slices.Equal(ids(h), c.want) {
			t.Errorf("History(site, %q, %d) = %v, %v; want %v", c.pipeline, c.limit, ids(h), err, c.want)
		}
	}
}
