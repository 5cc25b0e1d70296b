package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// The fingerprint index is sized to the root's catalog. When a publication
// grows or shrinks the root past a size, the index moves to the new layout
// whole (the old layout's files are removed), and the next publication
// still vouches for every output it keeps without reading any back.
func TestFingerprintIndexFollowsTheRootSizeWithoutLosingEntries(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		counting := newCounting(plain)
		h.AddDest(named(base, "site", planner.Replacement), counting, pipeA)
		at := t1
		publish := func(n int) {
			t.Helper()
			files := map[string]string{}
			for i := range n {
				files[fmt.Sprintf("d%d/f%04d.txt", i%7, i)] = fmt.Sprintf("file %d\n", i)
			}
			at = at.Add(time.Minute)
			h.MustPublish(at, pipeA, "site", "weatherreporter.v", files)
		}
		for _, step := range []struct {
			outputs int
			shards  []string
		}{
			{1000, []string{"1-00"}},
			{1100, []string{"2-00", "2-01"}}, // grown past 1024: two shards
			{1100, []string{"2-00", "2-01"}},
			{600, []string{"1-00"}}, // shrunk
			{600, []string{"1-00"}},
		} {
			counting.Reset()
			publish(step.outputs)
			// Every output of the previous publication is kept (same bytes,
			// new records): each is vouched for by the index, none read.
			wantStrings(t, fmt.Sprintf("outputs read back publishing %d", step.outputs), readBack(counting), nil)
			wantStrings(t, "fingerprint shards", shardFiles(t, plain), step.shards)
		}
	})
}

// shardFiles lists the fingerprint index's files, by name.
func shardFiles(t *testing.T, root storage.Backend) []string {
	t.Helper()
	var out []string
	err := root.List(context.Background(), engine.FingerprintsDir+"/", func(o storage.ObjectInfo) error {
		out = append(out, strings.TrimPrefix(o.Path, engine.FingerprintsDir+"/"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
