package consumer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/stores"
)

// TestS3UploadMemoryIsOneBudgetForAllWorkers: with the default workers (32)
// publishing into 16 S3 roots at once, the upload buffers of all of them
// stay within the process's one budget (stores.Opener.S3Budget: 64 MiB for
// buffers, 16 MiB for staged small objects), where a budget per root would
// allow 16 times that. Every destination is opened the production way
// (stores.Opener with an endpoint) against the in-process S3 server.
func TestS3UploadMemoryIsOneBudgetForAllWorkers(t *testing.T) {
	e := newEnv(t, "", true)
	e.s3.UseStandardChain(t) // the production opener reads the standard chain
	const roots = 16
	var yaml strings.Builder
	yaml.WriteString("pipelines:\n")
	for i := range roots {
		fmt.Fprintf(&yaml, "  - {id: p%d, destinations: [d%d]}\n", i, i)
	}
	yaml.WriteString("destinations:\n")
	for i := range roots {
		fmt.Fprintf(&yaml, "  - {id: d%d, backend: s3, bucket: @bucket@, path: r%d/, region: us-east-1, endpoint: %q}\n", i, i, e.s3.URL)
	}
	e.cfg = e.parse(yaml.String())
	// Per root: three 3 MiB files (over the 1 MiB staged in memory, under
	// the 8 MiB part: each is one PutObject read whole into the budget,
	// 4 at once per publication) and two small ones (staged in memory).
	// 16 publications at once would hold 192 MiB without a shared budget.
	big := func(i, j int) string { return strings.Repeat(fmt.Sprintf("%02d%02d", i, j), 3<<20/4) }
	ids := make([]string, roots)
	for i := range roots {
		files := map[string]string{"a.bin": big(i, 0), "b.bin": big(i, 1), "c.bin": big(i, 2), "small1.txt": fmt.Sprint(i), "small2.txt": "x"}
		loc, digest := e.bundle(fmt.Sprintf("src.s%d", i), files)
		ids[i] = e.announce(events.BundleReady{PipelineID: fmt.Sprintf("p%d", i), Bundle: loc, ManifestDigest: digest})
	}
	open := stores.New(e.cfg)
	opts := fastOptions()
	opts.Workers = 0 // the default
	// The production lease TTL: 48 MiB of uploads through one in-process
	// S3 server on a loaded machine must not lose a 2 s test lease, which
	// is not what this test is about.
	e.start(nodeConfig{opts: opts, open: open, leaseTTL: 30 * time.Second})
	for i, id := range ids {
		res := e.wait(id, 1, time.Minute)
		if res[0].Type != events.TypePublished || res[0].Written != 5 {
			t.Fatalf("root %d: %s written %d (%s)", i, res[0].Type, res[0].Written, res[0].Message)
		}
	}
	budget := open.S3Budget()
	peak, bound := budget.Peak(), budget.Size()+budget.Size()/4
	t.Logf("peak upload memory held %.1f MiB of %d + %d MiB", float64(peak)/(1<<20), budget.Size()>>20, budget.Size()>>22)
	if peak > bound {
		t.Errorf("upload memory held at once = %d bytes, want at most %d (one budget for the process)", peak, bound)
	}
	// The budget was in use, and more than one root's uploads shared it.
	if peak < 2*(3<<20) {
		t.Errorf("peak upload memory = %d bytes: the uploads did not go through the shared budget", peak)
	}
}
