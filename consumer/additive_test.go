package consumer_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/stores"
)

// additiveBurstYAML: one pipeline publishing to four additive roots.
const additiveBurstYAML = `
pipelines:
  - id: news.daily
    destinations: [a1, a2, a3, a4]
destinations:
  - {id: a1, backend: local, path: "@a1@", workflow: additive}
  - {id: a2, backend: local, path: "@a2@", workflow: additive}
  - {id: a3, backend: local, path: "@a3@", workflow: additive}
  - {id: a4, backend: local, path: "@a4@", workflow: additive}
`

// TestAdditiveVersionsInABurstAllArrive: 25 versions of one source, each
// adding its own day-N.txt beside 30 files every version has, announced
// in a burst in shuffled order to four additive roots served by two serve
// processes with 32 workers each. Newest wins per path: every version is
// published (none superseded), every day-N.txt reaches every root, and
// every common file holds the newest version's bytes.
func TestAdditiveVersionsInABurstAllArrive(t *testing.T) {
	t.Parallel()
	const (
		versions = 25
		common   = 30
		workers  = 32
	)
	e := newEnv(t, additiveBurstYAML, false)
	dests := []string{"a1", "a2", "a3", "a4"}

	// Each bundle made is a second newer than the one before (env.bundle).
	vs := make([]version, versions)
	for i := range vs {
		v := &vs[i]
		v.files = map[string]string{fmt.Sprintf("day-%02d.txt", i+1): fmt.Sprintf("day %d\n", i+1)}
		for k := range common {
			v.files[fmt.Sprintf("common/c%02d.txt", k)] = fmt.Sprintf("file %d of version %d\n", k, i+1)
		}
		v.loc, v.digest = e.bundle("news.today", v.files)
		v.src = sourceOfBundle(t, e, v.loc, v.digest)
	}

	for _, name := range []string{"serve1", "serve2"} {
		opts := fastOptions()
		opts.Workers = workers
		e.start(nodeConfig{name: name, opts: opts})
	}
	start := time.Now()
	var sent []events.BundleReady
	for _, i := range rand.New(rand.NewPCG(26, 0)).Perm(versions) {
		ev := events.BundleReady{ID: events.NewEventID(), PipelineID: "news.daily", Bundle: vs[i].loc, ManifestDigest: vs[i].digest}
		vs[i].event = e.announce(ev)
		sent = append(sent, ev)
	}
	e.waitFor(60*time.Second, func() bool { return complete(e, sent) }, "a result for every version and destination")
	e.quiet(10 * time.Second)
	t.Logf("%d publications in %s", versions*len(dests), time.Since(start).Round(time.Millisecond))
	e.checkNoBadEvents()

	// Exactly one result per (event, destination), published with the
	// version's source, every planned path accounted for.
	type key struct{ event, dest string }
	seen := map[key]events.Result{}
	kept := 0
	for _, r := range e.results.all() {
		k := key{r.BundleEventID, r.DestinationID}
		if prev, dup := seen[k]; dup {
			t.Errorf("event %s destination %s: two results, %s and %s", k.event, k.dest, prev.Type, r.Type)
		}
		seen[k] = r
		kept += r.KeptNewer
	}
	for i, v := range vs {
		for _, d := range dests {
			r, ok := seen[key{v.event, d}]
			switch {
			case !ok:
				t.Errorf("version %d, %s: no result", i+1, d)
			case r.Type != events.TypePublished:
				t.Errorf("version %d, %s: %s %s: %s", i+1, d, r.Type, r.Reason, r.Message)
			case r.Source == nil || *r.Source != sourceRefOf(v.src):
				t.Errorf("version %d, %s: published source %+v, want %+v", i+1, d, r.Source, v.src)
			case r.Written+r.Updated+r.Unchanged+r.KeptNewer != common+1:
				t.Errorf("version %d, %s: written %d, updated %d, unchanged %d, kept_newer %d; want %d paths in all",
					i+1, d, r.Written, r.Updated, r.Unchanged, r.KeptNewer, common+1)
			}
		}
	}
	if len(seen) != versions*len(dests) {
		t.Errorf("%d results, want %d", len(seen), versions*len(dests))
	}
	t.Logf("%d common files kept for a newer version", kept)

	// Every root holds every version's own file and the newest common
	// files, bytes and records.
	want := map[string]string{}
	wantSrc := map[string]catalog.Source{}
	for i, v := range vs {
		for p, c := range v.files {
			if i == versions-1 || p[:4] == "day-" {
				want[p], wantSrc[p] = digestOf(c), v.src
			}
		}
	}
	for _, d := range dests {
		dest, _ := e.cfg.Destination(d)
		root, err := (&testStores{open: stores.New(e.cfg)}).Destination(e.ctx, dest)
		if err != nil {
			t.Fatal(err)
		}
		got := files(t, root)
		for p := range got {
			if catalog.IsReserved(p) {
				delete(got, p)
			}
		}
		if !reflect.DeepEqual(got, want) {
			for p, sum := range want {
				if got[p] != sum {
					t.Errorf("%s: %s has sha %q, want %s (version of %s)", d, p, got[p], sum, wantSrc[p].Created.Format(time.TimeOnly))
				}
			}
			t.Errorf("%s holds %d files, want %d", d, len(got), len(want))
		}
		cat := readCatalog(t, root)
		if len(cat.Outputs) != len(want) {
			t.Errorf("%s: %d records, want %d", d, len(cat.Outputs), len(want))
		}
		for _, o := range cat.Outputs {
			if o.SHA256 != want[o.Path] || o.Source != wantSrc[o.Path] {
				t.Errorf("%s: %s recorded from %s (sha %s), want %s", d, o.Path, o.Source.Digest, o.SHA256, wantSrc[o.Path].Digest)
			}
		}
	}
}
