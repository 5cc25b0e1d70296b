package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
)

// A publication of a few outputs into a root whose catalog holds many
// asks the root about its own paths only (the backend looks them up
// instead of listing the root), and still sees what is in their way: an
// unmanaged file below a wanted path blocks it, an unmanaged file where a
// wanted path needs a folder blocks it too.
func TestSmallPublicationToLargeRootFindsOnlyItsPaths(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h := newHarness(t)
		plain, base := newRoot(t)
		root := newCounting(plain)
		h.AddDest(named(base, "weather", planner.Replacement), root, pipeA)
		h.AddDest(named(base, "tides", planner.Replacement), root, pipeB)
		many := map[string]string{}
		for i := range 1100 {
			many[fmt.Sprintf("tides/f%04d.txt", i)] = "t"
		}
		h.MustPublish(t1, pipeB, "tides", "tides.v1", many)
		mustPut(t, plain, "blocked/inside.txt", "someone else's")
		mustPut(t, plain, "file", "someone else's")
		root.Reset()

		res := h.MustPublish(t2, pipeA, "weather", "weatherreporter.v1", map[string]string{"new/a.txt": "a"})
		wantStrings(t, "written", itemPaths(res.Written), []string{"new/a.txt"})
		wantStrings(t, "Find calls", root.Calls("Find"), []string{"new/a.txt"})
		wantStrings(t, "List calls", root.Calls("List"), nil)
		wantStrings(t, "Stat calls", root.Calls("Stat"), nil)

		for _, p := range []string{"blocked", "file/x.txt"} {
			root.Reset()
			dir, _ := makeBundle(t, "weatherreporter.v2", map[string]string{p: "x"})
			res, err := h.Publish(t2, pipeA, "weather", dir)
			if !errors.Is(err, engine.ErrCollision) {
				t.Fatalf("%s: err = %v, want ErrCollision", p, err)
			}
			wantStrings(t, p+": collisions", res.Plan.Collisions, []string{p})
			wantStrings(t, p+": Find calls", root.Calls("Find"), []string{p})
		}
	})
}
