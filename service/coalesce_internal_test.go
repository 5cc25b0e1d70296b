package service

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// burstEvent is one event of a simulated root's line.
type burstEvent struct {
	v      version
	forced bool // an operator's event: publishes whatever the owner holds
}

// runInOrder is the owners' versions after running evs one by one from
// start, as the planner decides a replacement: a version older than the
// one of the same source the owner holds is superseded; any other
// publishes and replaces the owner's outputs.
func runInOrder(start map[catalog.Owner]catalog.Source, evs []burstEvent) map[catalog.Owner]catalog.Source {
	held := map[catalog.Owner]catalog.Source{}
	for o, s := range start {
		held[o] = s
	}
	for _, e := range evs {
		cur, ok := held[e.v.owner]
		if e.forced || !ok || cur.ID != e.v.source.ID || !planner.Newer(cur, e.v.source) {
			held[e.v.owner] = e.v.source
		}
	}
	return held
}

// TestPassingOverKeepsTheEndStateOfRunningInOrder: on random lines (two
// owners, two sources each, operator events, versions whose manifests are
// not read yet, a head already running, and the owners' versions before),
// taking out the places passedOver names, over rounds that learn more of
// the versions each time, leaves every owner with the version that
// running the whole line in order gives; and what passes over a place is
// a newer version of its source.
func TestPassingOverKeepsTheEndStateOfRunningInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 35))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	owners := []catalog.Owner{{PipelineID: "p", DestinationID: "a"}, {PipelineID: "p", DestinationID: "b"}}
	src := func(n int) catalog.Source {
		return catalog.Source{ID: []string{"s1", "s2"}[rng.IntN(2)], Created: base.Add(time.Duration(rng.IntN(4)) * time.Second),
			Digest: fmt.Sprintf("sha256:%02d", n)}
	}
	passed := 0
	for trial := range 20000 {
		evs := make([]burstEvent, 1+rng.IntN(8))
		for i := range evs {
			evs[i] = burstEvent{v: version{owner: owners[rng.IntN(2)], source: src(i)}, forced: rng.IntN(8) == 0}
			evs[i].v.eligible = !evs[i].forced
		}
		start := map[catalog.Owner]catalog.Source{}
		for i, o := range owners {
			if rng.IntN(3) > 0 {
				start[o] = src(90 + i)
			}
		}
		want := runInOrder(start, evs)
		headRuns := rng.IntN(2) == 0
		line := evs
		for round := 0; round < 4; round++ {
			st := make([]standing, len(line))
			for i := range line {
				if round == 3 || rng.IntN(3) > 0 {
					st[i].v = &line[i].v
				}
				st[i].started = i == 0 && headRuns
			}
			var kept []burstEvent
			for i, by := range passedOver(st) {
				if by == nil {
					kept = append(kept, line[i])
					continue
				}
				passed++
				if by.ID != line[i].v.source.ID || !planner.Newer(*by, line[i].v.source) {
					t.Fatalf("trial %d: %+v passed over by %+v", trial, line[i].v.source, *by)
				}
			}
			line = kept
		}
		if got := runInOrder(start, line); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("trial %d: line %+v from %v: in order %v, passed over %v", trial, evs, start, want, got)
		}
	}
	if passed == 0 {
		t.Fatal("nothing was ever passed over")
	}
}

// TestPassedOver names, for small lines, the places that need not run.
func TestPassedOver(t *testing.T) {
	o := catalog.Owner{PipelineID: "p", DestinationID: "d"}
	at := func(id string, sec int) *version {
		return &version{owner: o, source: catalog.Source{ID: id, Created: time.Unix(int64(sec), 0).UTC(), Digest: fmt.Sprint("d", sec)}, eligible: true}
	}
	for _, tc := range []struct {
		name string
		line []standing
		want []int // the seconds of the versions that pass over each place; 0: it runs
	}{
		{"a burst: every older version passes to the newest", []standing{{v: at("s", 1)}, {v: at("s", 2)}, {v: at("s", 3)}}, []int{3, 3, 0}},
		{"the running head is never passed over", []standing{{v: at("s", 1), started: true}, {v: at("s", 2)}}, []int{0, 0}},
		{"an older version behind a newer one", []standing{{v: at("s", 3), started: true}, {v: at("s", 1)}}, []int{0, 3}},
		{"another source between: the older one runs", []standing{{v: at("s", 3)}, {v: at("t", 1)}, {v: at("s", 1)}}, []int{0, 0, 0}},
		{"an unread manifest between: the older one runs", []standing{{v: at("s", 3)}, {}, {v: at("s", 1)}}, []int{0, 0, 0}},
		{"a newer version after another source", []standing{{v: at("s", 1)}, {v: at("t", 1)}, {v: at("s", 2)}}, []int{2, 0, 0}},
		{"an unread manifest is never passed over", []standing{{}, {v: at("s", 2)}}, []int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := passedOver(tc.line)
			for i, by := range got {
				sec := 0
				if by != nil {
					sec = int(by.Created.Unix())
				}
				if sec != tc.want[i] {
					t.Errorf("place %d: passed over by %d, want %d", i, sec, tc.want[i])
				}
			}
		})
	}
}
