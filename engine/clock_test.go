package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
)

// A root pinned by a record from the future (a producer's clock ran
// ahead, before distributor refused such bundles) is freed by rolling back
// to a correctly stamped version (AllowOlder): the paths it writes take its
// bytes; with DeleteLater the paths only the future version wrote go too,
// so the next correctly stamped version writes every path again. Meanwhile
// a bundle from the future is refused and changes nothing.
func TestAdditiveRollBackFreesARootPinnedByTheFuture(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		root, base := newRoot(t)
		h.AddDest(named(base, "latest", planner.Additive), root, pipeA)
		const id = "weatherreporter.today"
		year2099 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)

		// The pin, as a distributor without the clock check published it.
		h.Config.MaxClockSkew = config.Duration(100 * 365 * 24 * time.Hour)
		future, _ := makeBundleAt(t, id, year2099, map[string]string{"common.txt": "2099", "day-9.txt": "nine"})
		if _, err := h.Publish(t1, pipeA, "latest", future); err != nil {
			t.Fatal(err)
		}
		h.Config.MaxClockSkew = 0 // the default, 5 minutes
		if _, err := h.Publish(t1, pipeA, "latest", future); !errors.Is(err, bundle.ErrFutureCreated) {
			t.Fatalf("the bundle from the future again: %v, want it refused", err)
		}

		// Pinned: a correctly stamped version keeps off the future's paths.
		today, _ := makeBundleAt(t, id, t0, map[string]string{"common.txt": "today", "day-1.txt": "one"})
		res, err := h.Publish(t2, pipeA, "latest", today)
		if err != nil || res.KeptNewer != 1 {
			t.Fatalf("correct version on the pinned root: err %v, kept_newer %d, want 1 kept", err, res.KeptNewer)
		}
		wantContents(t, root, map[string]string{"common.txt": "2099", "day-1.txt": "one", "day-9.txt": "nine"})

		// A roll back to the correct version replaces the pinned path; the
		// future's other path stays, still pinned.
		res, err = h.Publish(t2.Add(time.Minute), pipeA, "latest", today, func(r *service.Request) { r.AllowOlder = true })
		if err != nil || res.KeptNewer != 0 {
			t.Fatalf("roll back: err %v, kept_newer %d", err, res.KeptNewer)
		}
		wantStrings(t, "written", itemPaths(res.Written), []string{"common.txt"})
		wantStrings(t, "deleted", res.Deleted, nil)
		wantContents(t, root, map[string]string{"common.txt": "today", "day-1.txt": "one", "day-9.txt": "nine"})

		// The way out: roll back deleting later versions' paths.
		res, err = h.Publish(t2.Add(time.Minute), pipeA, "latest", today, func(r *service.Request) { r.AllowOlder, r.DeleteLater = true, true })
		if err != nil || res.KeptNewer != 0 {
			t.Fatalf("roll back: err %v, kept_newer %d", err, res.KeptNewer)
		}
		wantStrings(t, "written", itemPaths(res.Written), nil)
		wantStrings(t, "deleted", res.Deleted, []string{"day-9.txt"})
		wantContents(t, root, map[string]string{"common.txt": "today", "day-1.txt": "one"})
		cat := assertDescribesStorage(t, root)
		for _, o := range cat.Outputs {
			if o.Source.Created.After(t2) {
				t.Fatalf("%s still recorded from %s", o.Path, o.Source.Created)
			}
		}

		// Free: the next correctly stamped version writes every path.
		tomorrow, _ := makeBundleAt(t, id, t0.Add(time.Hour), map[string]string{"common.txt": "tomorrow", "day-2.txt": "two"})
		res, err = h.Publish(t2.Add(2*time.Minute), pipeA, "latest", tomorrow)
		if err != nil || res.KeptNewer != 0 {
			t.Fatalf("next version: err %v, kept_newer %d, want none kept", err, res.KeptNewer)
		}
		wantContents(t, root, map[string]string{"common.txt": "tomorrow", "day-1.txt": "one", "day-2.txt": "two"})
		assertDescribesStorage(t, root)
	})
}
