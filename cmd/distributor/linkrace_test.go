package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// linkRace is a producer's attack on bundle_locations: inside its own
// folder, a link that a goroutine re-points as fast as it can (a rename of
// a fresh link over it) between its own bundle and another pipeline's,
// which lies outside the producer's folder.
type linkRace struct {
	cfg, link, ownRoot string
	foreignDigest      string
	stop               func()
}

const foreignSource = "foreign.secret"

// newLinkRace writes the configuration (p.own and p.foreign, each with its
// own bundle folder and destination; NATS at url when not ""), both
// bundles and the link, and starts the flipping.
func newLinkRace(t *testing.T, url string) *linkRace {
	t.Helper()
	dir := t.TempDir()
	own, foreign := filepath.Join(dir, "own-bundles"), filepath.Join(dir, "foreign-bundles")
	r := &linkRace{cfg: filepath.Join(dir, "distributor.yaml"), link: filepath.Join(own, "link"), ownRoot: filepath.Join(dir, "roots", "own")}
	natsBlock := "  listen: 127.0.0.1:1\n"
	if url != "" {
		natsBlock = "  url: " + url + "\n"
	}
	for _, d := range []string{r.ownRoot, filepath.Join(dir, "roots", "foreign")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Folders listed before the producer's own, each resolved between the
	// check of a path and its open: they widen the window that a checked
	// path leaves (as a configuration with several locations does), so
	// that 300 runs find the race on code that checks a path.
	var entries []string
	for i := range 8 {
		deep := filepath.Join(append([]string{dir, "other", strconv.Itoa(i)}, slices.Repeat([]string{"d"}, 40)...)...)
		if err := os.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, strconv.Quote(deep))
	}
	entries = append(entries, strconv.Quote(own))
	cfg := fmt.Sprintf("nats:\n%spipelines:\n"+
		"  - id: p.own\n    destinations: [own]\n    bundle_locations: [%s]\n"+
		"  - id: p.foreign\n    destinations: [foreign]\n    bundle_locations: [%q]\n"+
		"destinations:\n"+
		"  - id: own\n    backend: local\n    path: %q\n    workflow: additive\n"+
		"  - id: foreign\n    backend: local\n    path: %q\n    workflow: additive\n",
		natsBlock, strings.Join(entries, ", "), foreign, r.ownRoot, filepath.Join(dir, "roots", "foreign"))
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ownBundle, foreignBundle := filepath.Join(own, "b1"), filepath.Join(foreign, "secret")
	testenv.WriteFiles(t, ownBundle, map[string]string{"own.txt": "own\n"})
	testenv.WriteFiles(t, foreignBundle, map[string]string{"secret.txt": "secret\n"})
	for b, id := range map[string]string{ownBundle: "own.b1", foreignBundle: foreignSource} {
		if code, _, stderr := runCmd(t, "bundle", "create", b, "--id", id); code != 0 {
			t.Fatalf("bundle create %s: exit %d: %s", b, code, stderr)
		}
	}
	r.foreignDigest = digestOfFile(t, filepath.Join(foreignBundle, "manifest.json"))
	if err := os.Symlink("b1", r.link); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		next := filepath.Join(own, "next")
		for i := 0; ctx.Err() == nil; i++ {
			target := "b1"
			if i%2 == 1 {
				target = foreignBundle
			}
			os.Remove(next)
			if err := os.Symlink(target, next); err == nil {
				os.Rename(next, r.link)
			}
		}
	})
	r.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(r.stop)
	return r
}

// foreignRecords counts the own destination's catalog records that name
// the foreign source (none while it has no catalog).
func (r *linkRace) foreignRecords(t *testing.T) int {
	t.Helper()
	if _, err := os.Stat(filepath.Join(r.ownRoot, catalog.FileName)); os.IsNotExist(err) {
		return 0
	}
	n := 0
	for _, o := range readCatalog(t, r.ownRoot).Outputs {
		if o.Source.ID == foreignSource {
			n++
		}
	}
	return n
}

// Rule: a bundle is checked against bundle_locations on the folder that is
// opened, not on a path resolved before: while a link in the producer's
// own folder flips between its bundle and another pipeline's, 300 applies
// never publish the other bundle. Each is published from the producer's
// own bundle (exit 0) or refused in one line (bundle_not_allowed, exit 2).
func TestApplyThroughAFlippingLinkNeverPublishesAForeignBundle(t *testing.T) {
	t.Parallel()
	r := newLinkRace(t, "")
	const runs = 300
	deadline := time.Now().Add(2 * time.Minute) // bounds a slow machine; the count is what the rule needs
	outcomes := map[string]int{}
	for i := 0; i < runs && time.Now().Before(deadline); i++ {
		code, stdout, stderr := runCmd(t, "apply", "--pipeline", "p.own", "--bundle", r.link, "--config", r.cfg)
		switch {
		case code == 0:
			outcomes["published"]++
		case code == exitUsage && strings.HasPrefix(stderr, "distributor: bundle location not allowed: bundle "+r.link+` of pipeline "p.own" `) &&
			strings.Count(stderr, "\n") == 1:
			outcomes["bundle_not_allowed"]++
		default:
			t.Fatalf("apply %d: exit %d\n%s%s", i, code, stdout, stderr)
		}
		if n := r.foreignRecords(t); n > 0 {
			t.Fatalf("apply %d (exit %d) published the foreign bundle: %d record(s) of %s in the own destination (outcomes so far %v)",
				i, code, n, foreignSource, outcomes)
		}
	}
	t.Logf("outcomes of %d applies: %v", runs, outcomes)
	if _, err := os.Stat(filepath.Join(r.ownRoot, "secret.txt")); !os.IsNotExist(err) {
		t.Errorf("the foreign file is in the own destination: %v", err)
	}
}

// Rule: the same for serve: 300 bundle-ready events of the producer's
// pipeline that name the flipping link and the foreign manifest's digest
// (which the events stream shows) each end in one failed result
// (bundle_not_allowed when the foreign folder was opened, digest_mismatch
// when the own one was), never in a publication of the foreign source.
func TestServeThroughAFlippingLinkNeverPublishesAForeignBundle(t *testing.T) {
	t.Parallel()
	n := testenv.NewNATS(t)
	r := newLinkRace(t, n.URL)
	startServe(t, r.cfg)

	nc := n.Conn(t)
	results := make(chan events.Result, 1024)
	sub, err := nc.Subscribe("distributor.events.>", func(m *nats.Msg) {
		if res, err := events.DecodeResult(m.Data); err == nil {
			results <- res
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const runs = 300
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds a slow machine
	defer cancel()
	subjects := events.Subjects{}
	for i := range runs {
		ev := events.BundleReady{SchemaVersion: 1, Type: events.TypeBundleReady, ID: fmt.Sprintf("race-%d", i),
			PipelineID: "p.own", Bundle: r.link, ManifestDigest: r.foreignDigest}
		data, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subjects.BundleReady("p.own"), data, jetstream.WithMsgID(ev.ID)); err != nil {
			t.Fatal(err)
		}
	}
	outcomes := map[string]int{}
	for got := 0; got < runs; got++ {
		var res events.Result
		select {
		case res = <-results:
		case <-ctx.Done():
			t.Fatalf("%d of %d results after the time limit (outcomes %v)", got, runs, outcomes)
		}
		switch {
		case res.Type == events.TypeFailed && res.Reason == events.ReasonBundleNotAllowed &&
			strings.HasPrefix(res.Message, "bundle location not allowed: bundle "+r.link+` of pipeline "p.own" `):
		case res.Type == events.TypeFailed && res.Reason == events.ReasonDigestMismatch:
		default:
			t.Fatalf("event %s: %s %s: %s; want failed (bundle_not_allowed or digest_mismatch)", res.BundleEventID, res.Type, res.Reason, res.Message)
		}
		outcomes[res.Reason]++
	}
	t.Logf("outcomes of %d events: %v", runs, outcomes)
	if n := r.foreignRecords(t); n > 0 {
		t.Fatalf("%d record(s) of %s in the own destination", n, foreignSource)
	}
}
