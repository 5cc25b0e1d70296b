package consumer_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// TestEventLogLines: every line about an event names it with the same keys
// (event_id, pipeline_id, attempt; destination_id, root and lease_token
// once a destination's lease is held); a retry is logged at warn, a failed
// result (here max_deliveries) at error, a published one at info.
func TestEventLogLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var logs testenv.SyncBuffer
	var calls atomic.Int32
	opts := fastOptions()
	opts.MaxDeliver = 2
	opts.BackOff = []time.Duration{50 * time.Millisecond}
	e.start(nodeConfig{opts: opts, wrap: flaky(1000, &calls), log: zerolog.New(&logs)})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.wait(id, 2, 20*time.Second)
	e.settled(5 * time.Second)

	roots := map[string]string{}
	for _, d := range []string{"site", "archive"} {
		dst, _ := e.cfg.Destination(d)
		roots[d] = dst.RootKey()
	}
	type line struct {
		Level, Message, Error string
		EventID               string  `json:"event_id"`
		PipelineID            string  `json:"pipeline_id"`
		Attempt               float64 `json:"attempt"`
		DestinationID         string  `json:"destination_id"`
		Root                  string  `json:"root"`
		LeaseToken            string  `json:"lease_token"`
		NextDelay             string  `json:"next_delay"`
		Type, Reason          string
		OldEvent              *string `json:"event"`
		OldPipeline           *string `json:"pipeline"`
		OldDestination        *string `json:"destination"`
	}
	var got []string
	for raw := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, raw)
		}
		if l.OldEvent != nil || l.OldPipeline != nil || l.OldDestination != nil {
			t.Errorf("line uses the old keys event/pipeline/destination: %s", raw)
		}
		if l.EventID != id {
			continue
		}
		if l.PipelineID != "weather.daily" || l.Attempt < 1 || l.DestinationID == "" || l.Root != roots[l.DestinationID] || l.LeaseToken == "" {
			t.Errorf("line about %s lacks pipeline_id, attempt, destination_id, root or lease_token: %s", id, raw)
		}
		got = append(got, strings.Join([]string{l.Level, l.Message, l.DestinationID, strconvI(l.Attempt), l.Type, l.Reason, l.NextDelay}, " "))
		if l.Level == "warn" && !strings.Contains(l.Error, "503 slow down") {
			t.Errorf("retry line without its cause: %s", raw)
		}
	}
	slices.Sort(got)
	want := []string{
		"error result archive 2 failed max_deliveries ",
		"info result site 1 published  ",
		"warn transient failure; will retry archive 1   50ms",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines about the event (level message destination attempt type reason next_delay):\n got %q\nwant %q\nall logs:\n%s", got, want, logs.String())
	}
}

func strconvI(f float64) string { return strconv.Itoa(int(f)) }

// recorder is a consumer.Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	started  []int
	inFlight int
	obs      []consumer.Observation
}

func (r *recorder) EventStarted(attempt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, attempt)
	r.inFlight++
}

func (r *recorder) EventDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
}

func (*recorder) Recreated() {}

func (r *recorder) Observe(o consumer.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

// TestObserverSeesOutcomes: the observer is told each delivery (attempt
// numbers: redeliveries), each retry and each reported outcome with what
// the engine did, and the in-flight count returns to zero.
func TestObserverSeesOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var calls atomic.Int32
	rec := &recorder{}
	opts := fastOptions()
	opts.MaxDeliver = 2
	opts.BackOff = []time.Duration{50 * time.Millisecond}
	opts.Observer = rec
	e.start(nodeConfig{opts: opts, wrap: flaky(1000, &calls)})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.wait(id, 2, 20*time.Second)
	e.settled(5 * time.Second)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.started, []int{1, 2}) || rec.inFlight != 0 {
		t.Errorf("deliveries %v, in flight %d; want [1 2] and 0", rec.started, rec.inFlight)
	}
	var got []string
	for _, o := range rec.obs {
		got = append(got, strings.Join([]string{o.Destination, o.Type, o.Reason}, " "))
		if o.Duration <= 0 {
			t.Errorf("%s %s: no duration", o.Destination, o.Type)
		}
		if o.Type == events.TypePublished && (len(o.Result.Written) != 3 || o.Result.LeaseToken == "") {
			t.Errorf("published site: %d written, lease token %q; want 3 and a token", len(o.Result.Written), o.Result.LeaseToken)
		}
	}
	slices.Sort(got)
	want := []string{"archive failed max_deliveries", "archive retry ", "site published "}
	if !slices.Equal(got, want) {
		t.Errorf("observations %q, want %q", got, want)
	}
}
