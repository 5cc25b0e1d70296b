package consumer_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/stores"
)

const orderLocalYAML = `
pipelines:
  - id: weather.daily
    destinations: [live]
destinations:
  - id: live
    backend: local
    path: @live@
    workflow: replacement
`

const orderS3YAML = `
pipelines:
  - id: weather.daily
    destinations: [live]
destinations:
  - id: live
    backend: s3
    bucket: @bucket@
    path: weather/live/
    region: us-east-1
    workflow: replacement
`

// TestNewestVersionWinsWhateverTheOrder: eight versions of one source (each
// created later than the one before, with its own content) are announced to
// a replacement destination served by two serve processes with four
// workers each. Whatever the order of the announcements, the newest version
// ends up live and in the catalog; every event gets exactly one result,
// published or superseded (by a newer version, changing nothing), never
// failed; the newest one's is published.
func TestNewestVersionWinsWhateverTheOrder(t *testing.T) {
	t.Parallel()
	const n = 8
	orders := []struct {
		name string
		// order returns the announcement order of versions 0..n-1; first
		// is announced and finished alone before the others.
		order func() (first []int, rest []int)
	}{
		{"in order", func() ([]int, []int) { return nil, seq(n) }},
		{"shuffled", func() ([]int, []int) {
			return nil, rand.New(rand.NewPCG(8, 1)).Perm(n)
		}},
		// Deterministically the worst case before newest-wins: every older
		// version arrives after the newest is live.
		{"newest first", func() ([]int, []int) {
			rest := rand.New(rand.NewPCG(8, 2)).Perm(n - 1)
			return []int{n - 1}, rest
		}},
	}
	backends := []struct {
		name string
		yaml string
		s3   bool
	}{{"local", orderLocalYAML, false}, {"s3", orderS3YAML, true}}
	for _, be := range backends {
		for _, o := range orders {
			t.Run(be.name+"/"+o.name, func(t *testing.T) {
				e := newEnv(t, be.yaml, be.s3)
				first, rest := o.order()
				twoServes := []nodeConfig{{name: "serve1", opts: fastOptions()}, {name: "serve2", opts: fastOptions()}}
				checkNewestWins(t, e, twoServes, n, first, rest)
			})
		}
	}
}

// TestOneProcessPublishesABurstInDeliveryOrder: sixteen versions announced
// in order, in a burst, to one serve process with sixteen workers: each
// event takes its place in the root's line as it is delivered, so the
// versions publish in turn and none is superseded by a later one whose
// worker happened to start first; a version may only be passed over by a
// newer one waiting behind it. (Their result events may still be
// published out of order: each is sent after its publication ends.)
func TestOneProcessPublishesABurstInDeliveryOrder(t *testing.T) {
	t.Parallel()
	const n = 16
	for _, be := range []struct {
		name, yaml string
		s3         bool
	}{{"local", orderLocalYAML, false}, {"s3", orderS3YAML, true}} {
		t.Run(be.name, func(t *testing.T) {
			e := newEnv(t, be.yaml, be.s3)
			opts := fastOptions()
			opts.Workers = n
			// The order holds within the lease wait: a long one, so that
			// a slow machine (-race, a loaded CI) waits instead of
			// letting a later version go first.
			node := nodeConfig{name: "serve", opts: opts, leaseWait: 2 * time.Minute}
			checkNewestWins(t, e, []nodeConfig{node}, n, nil, seq(n))
			overtaken := 0
			for _, r := range e.results.all() {
				if r.Type == events.TypeSuperseded && !strings.Contains(r.Message, "waits in this process's line") {
					overtaken++
				}
			}
			if overtaken != 0 {
				t.Errorf("%d of %d versions superseded by a published newer one, want none: each was announced after the one before", overtaken, n)
			}
		})
	}
}

// checkNewestWins runs nodes, announces versions first (and waits for
// their results) then rest, checks the newest wins and returns how many
// versions were superseded.
func checkNewestWins(t *testing.T, e *env, nodes []nodeConfig, n int, first, rest []int) int {
	t.Helper()
	for _, nc := range nodes {
		e.start(nc)
	}
	vs := make([]version, n)
	for i := range vs {
		v := &vs[i]
		v.files = map[string]string{
			"report.md":                      fmt.Sprintf("# Weather, version %d\n", i+1),
			fmt.Sprintf("data/v%d.csv", i+1): fmt.Sprintf("version,%d\n", i+1),
		}
		v.loc, v.digest = e.bundle("weather.today", v.files)
		v.src = sourceOfBundle(t, e, v.loc, v.digest)
		if i > 0 && !planner.Newer(v.src, vs[i-1].src) {
			t.Fatalf("version %d is not newer than version %d", i+1, i)
		}
	}
	newest := &vs[n-1]
	var sent []events.BundleReady
	announce := func(order []int) {
		for _, i := range order {
			ev := events.BundleReady{ID: events.NewEventID(), PipelineID: "weather.daily", Bundle: vs[i].loc, ManifestDigest: vs[i].digest}
			vs[i].event = e.announce(ev)
			sent = append(sent, ev)
		}
	}
	announce(first)
	e.waitFor(30*time.Second, func() bool { return complete(e, sent) }, "the results of the first announcements")
	announce(rest)
	e.waitFor(60*time.Second, func() bool { return complete(e, sent) }, "a result for every version")
	e.settled(10 * time.Second)
	e.checkNoBadEvents()

	byEvent := map[string][]events.Result{}
	for _, r := range e.results.all() {
		byEvent[r.BundleEventID] = append(byEvent[r.BundleEventID], r)
	}
	superseded := 0
	for i, v := range vs {
		rs := byEvent[v.event]
		if len(rs) != 1 {
			t.Errorf("version %d: %d results, want exactly 1: %+v", i+1, len(rs), rs)
			continue
		}
		r := rs[0]
		if r.DestinationID != "live" || r.Source == nil || *r.Source != sourceRefOf(v.src) {
			t.Errorf("version %d: result for %q with source %+v, want live and %+v", i+1, r.DestinationID, r.Source, v.src)
		}
		switch r.Type {
		case events.TypePublished:
			if r.SupersededBy != nil {
				t.Errorf("version %d: published with superseded_by %+v", i+1, r.SupersededBy)
			}
		case events.TypeSuperseded:
			superseded++
			if r.SupersededBy == nil || !planner.Newer(sourceOfRef(*r.SupersededBy), v.src) || !isVersion(vs, *r.SupersededBy) {
				t.Errorf("version %d: superseded by %+v, want a newer announced version", i+1, r.SupersededBy)
			}
			if r.Written+r.Updated+r.Deleted != 0 || len(r.Outputs) != 0 || r.Reason != "" {
				t.Errorf("version %d: superseded result says something changed: %+v", i+1, r)
			}
		default:
			t.Errorf("version %d: %s %s: %s", i+1, r.Type, r.Reason, r.Message)
		}
		if i == n-1 && r.Type != events.TypePublished {
			t.Errorf("newest version: %s, want published", r.Type)
		}
	}
	if len(first) > 0 && superseded != n-1 {
		t.Errorf("%d versions superseded, want every one announced after the newest (%d)", superseded, n-1)
	}
	t.Logf("order %v then %v: %d of %d superseded", first, rest, superseded, n)

	checkRootHoldsNewest(t, e, newest)
	return superseded
}

// checkRootHoldsNewest: the newest version is what the root holds, bytes
// and catalog.
func checkRootHoldsNewest(t *testing.T, e *env, newest *version) {
	t.Helper()
	d, _ := e.cfg.Destination("live")
	root, err := (&testStores{open: stores.New(e.cfg), s3: e.s3}).Destination(e.ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for p, c := range newest.files {
		want[p] = digestOf(c)
	}
	got := files(t, root)
	for p := range got {
		if catalog.IsReserved(p) {
			delete(got, p)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("root holds %v, want the newest version's %v", got, want)
	}
	var paths []string
	for _, o := range readCatalog(t, root).Outputs {
		paths = append(paths, o.Path)
		if o.Source != newest.src || o.SHA256 != want[o.Path] {
			t.Errorf("catalog: %s from %+v sha %s, want the newest version's", o.Path, o.Source, o.SHA256)
		}
	}
	if wantPaths := sortedKeys(want); !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("catalog records %q, want %q", paths, wantPaths)
	}
}

// version is one announced version of the source.
type version struct {
	loc, digest string
	files       map[string]string
	src         catalog.Source
	event       string
}

// sourceOfBundle is the source identity of the announced bundle.
func sourceOfBundle(t *testing.T, e *env, loc, digest string) catalog.Source {
	t.Helper()
	store, err := (&testStores{open: stores.New(e.cfg), s3: e.s3}).Bundle(e.ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(e.ctx, store, loc, digest, 0)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()}
}

func sourceRefOf(s catalog.Source) events.SourceRef {
	return events.SourceRef{ID: s.ID, Digest: s.Digest, Created: s.Created}
}

func sourceOfRef(r events.SourceRef) catalog.Source {
	return catalog.Source{ID: r.ID, Digest: r.Digest, Created: r.Created.UTC()}
}

func isVersion(vs []version, r events.SourceRef) bool {
	for _, v := range vs {
		if v.src == sourceOfRef(r) {
			return true
		}
	}
	return false
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
