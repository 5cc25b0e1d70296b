package consumer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// TestFrozenS3DestinationIsRetried: a publication to an S3 server that hangs
// (accepts connections, answers nothing) fails within the configured
// timeouts as a transient failure and is retried with back-off; once the
// server runs again, the retry publishes.
func TestFrozenS3DestinationIsRetried(t *testing.T) {
	e := newEnv(t, "", true)
	e.s3.UseStandardChain(t) // the production opener reads the standard chain
	proxy := testenv.NewFreezableProxy(t, e.s3.URL)
	e.cfg = e.parse(`
pipelines:
  - id: weather.daily
    destinations: [bucket]
destinations:
  - id: bucket
    backend: s3
    bucket: @bucket@
    path: weather/
    region: us-east-1
    endpoint: ` + proxy.URL + `
    timeouts: {connect: 300ms, first_byte: 300ms, idle: 300ms, attempts: 2}
`)
	var logs testenv.SyncBuffer
	e.start(nodeConfig{opts: fastOptions(), log: zerolog.New(&logs)})
	loc, digest := e.bundle("weather.tomorrow", v1)

	proxy.Freeze()
	start := time.Now()
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.waitFor(10*time.Second, func() bool {
		return strings.Contains(logs.String(), "transient failure; will retry")
	}, "a transient failure against the frozen server")
	took := time.Since(start)
	line := logs.String()
	if !strings.Contains(line, "S3 endpoint "+proxy.URL+" did not answer within 300ms (first byte)") {
		t.Fatalf("transient failure logged as:\n%s\nwant the first-byte timeout of %s", line, proxy.URL)
	}
	// Two attempts of 300 ms plus the SDK's back-off (at most 2 s) and slack.
	if took > 4*time.Second {
		t.Fatalf("first transient failure after %v, want within the timeouts (< 4s)", took)
	}
	if got := e.results.of(id); len(got) != 0 {
		t.Fatalf("results while the server hangs: %+v, want none (retrying)", got)
	}

	proxy.Unfreeze()
	res := e.wait(id, 1, 30*time.Second)
	if r := res[0]; r.Type != events.TypePublished || r.Written != 2 || r.Attempts < 2 {
		t.Fatalf("after the server resumed: %s written %d attempts %d (%s %s), want published, 2 written, attempt >= 2", r.Type, r.Written, r.Attempts, r.Reason, r.Message)
	}
	root, err := s3.NewFromClient(e.s3.Client, e.bucket, "weather/", s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cat := readCatalog(t, root)
	if len(cat.Outputs) != 2 || cat.Outputs[0].Path != "data/a.csv" || cat.Outputs[1].Path != "report.md" {
		t.Fatalf("catalog = %+v", cat.Outputs)
	}
	checkFiles(t, root, map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
	e.settled(5 * time.Second)
	e.checkNoBadEvents()
}
