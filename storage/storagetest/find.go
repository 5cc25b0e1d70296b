package storagetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// findObjects are the objects the Find cases look among: for the query
// paths below, objects at them, at a folder on the way to them and under
// them, and neighbours in path order that no write of them needs.
var findObjects = []string{
	"a",         // a file where the folder of "a/b.txt" goes
	"d/x",       // under "d"
	"d/y/z",     // under "d", deeper
	"d.txt",     // neighbours of "d" in path order
	"d0",        //
	"dx/1",      //
	"e.txt",     // at "e.txt"
	"f/g/h.txt", // at "f/g/h.txt", with its folders
	"f/other",   // beside it
	"u/1",       // unrelated
	"v",         //
}

// findQuery are the paths a write asks about, in increasing order: one
// below a file, a folder, an object, an object in folders, one nothing is
// at, nor on the way to.
var findQuery = []string{"a/b.txt", "d", "e.txt", "f/g/h.txt", "nope/none"}

// findRoot fills b with findObjects and a catalog (a reserved object,
// which Find reports like any other) and returns every object as List
// reports it.
func findRoot(t *testing.T, b storage.Backend) map[string]storage.ObjectInfo {
	t.Helper()
	for _, p := range findObjects {
		put(t, b, p, []byte("object "+p))
	}
	if _, err := b.WriteIfVersion(t.Context(), catalog.FileName, []byte("{}"), ""); err != nil {
		t.Fatal(err)
	}
	return listAll(t, b)
}

// listAll is every object List reports, reserved ones included.
func listAll(t *testing.T, b storage.Backend) map[string]storage.ObjectInfo {
	t.Helper()
	all := map[string]storage.ObjectInfo{}
	if err := b.List(t.Context(), "", func(o storage.ObjectInfo) error {
		all[o.Path] = o
		return nil
	}); err != nil {
		t.Fatalf("List: %v", err)
	}
	return all
}

// find runs Find and returns what it reported, failing on an error or on
// an object reported twice.
func find(t *testing.T, b storage.Backend, q storage.Query) map[string]storage.ObjectInfo {
	t.Helper()
	got := map[string]storage.ObjectInfo{}
	var twice []string
	err := b.Find(t.Context(), q, func(o storage.ObjectInfo) error {
		if _, ok := got[o.Path]; ok {
			twice = append(twice, o.Path)
		}
		got[o.Path] = o
		return nil
	})
	if err != nil {
		t.Fatalf("Find(%s): %v", describe(q), err)
	}
	if len(twice) > 0 {
		t.Fatalf("Find(%s) reported %q more than once", describe(q), twice)
	}
	return got
}

func describe(q storage.Query) string {
	paths := "nil"
	if q.Paths != nil {
		paths = fmt.Sprintf("%d paths", len(q.Paths))
		if len(q.Paths) <= 8 {
			paths = fmt.Sprintf("%q", q.Paths)
		}
	}
	held := "no catalog"
	if q.Held.Paths != nil {
		n, _ := q.Held.Paths()
		held = fmt.Sprintf("held %d (at most %d)", n, q.Held.AtMost)
	} else if q.Held.AtMost != 0 {
		held = fmt.Sprintf("at most %d, no paths", q.Held.AtMost)
	}
	return "Paths " + paths + ", " + held
}

// needed is what a write of paths must know of, of all: every object at
// one of them, at a folder on the way to one, or under one.
func needed(all map[string]storage.ObjectInfo, paths []string) map[string]storage.ObjectInfo {
	need := map[string]storage.ObjectInfo{}
	for p, o := range all {
		for _, q := range paths {
			if p == q || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
				need[p] = o
			}
		}
	}
	return need
}

// wantFound checks that got holds every object of need, as List reports
// it, and nothing that is not an object of all.
func wantFound(t *testing.T, q storage.Query, got, need, all map[string]storage.ObjectInfo) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(need)) {
		o, ok := got[p]
		switch {
		case !ok:
			t.Errorf("Find(%s) did not report %q, which the write must know of", describe(q), p)
		case o.Size != need[p].Size || o.Fingerprint != need[p].Fingerprint:
			t.Errorf("Find(%s) reported %+v; List reports %+v", describe(q), o, need[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := all[p]; !ok {
			t.Errorf("Find(%s) reported %q, which is no object of the root", describe(q), p)
		}
	}
}

// held is a Held of paths.
func held(paths []string) storage.Held {
	return storage.Held{AtMost: len(paths), Paths: func() (int, func(int) string) {
		return len(paths), func(i int) string { return paths[i] }
	}}
}

// bigHeld is a catalog of n records that are not in the root, in path
// order: a root believed to hold many objects.
func bigHeld(n int) storage.Held {
	return storage.Held{AtMost: n, Paths: func() (int, func(int) string) {
		return n, func(i int) string { return fmt.Sprintf("held/%06d.bin", i) }
	}}
}

// Without paths, Find reports every object once, however many the root
// is believed to hold.
func testFindEverything(t *testing.T, b storage.Backend) {
	all := findRoot(t, b)
	for _, h := range []storage.Held{
		{},
		{AtMost: 10_000},
		held(slices.Sorted(maps.Keys(all))),
		bigHeld(10_000),
	} {
		q := storage.Query{Held: h}
		got := find(t, b, q)
		wantFound(t, q, got, all, all)
	}
}

// With paths, Find reports every object at one, at a folder on the way to
// one, and under one, whichever way it takes: a listing (no catalog, few
// records) or lookups (a catalog of many records against few paths).
func testFindPaths(t *testing.T, b storage.Backend) {
	all := findRoot(t, b)
	need := needed(all, findQuery)
	for _, p := range []string{"a", "d/x", "d/y/z", "e.txt", "f/g/h.txt"} {
		if _, ok := need[p]; !ok {
			t.Fatalf("the case is wrong: %q is not needed (%q)", p, slices.Sorted(maps.Keys(need)))
		}
	}
	for _, h := range []storage.Held{
		{},
		{AtMost: 10_000},
		held(slices.Sorted(maps.Keys(all))),
		bigHeld(10_000),
		bigHeld(100_000),
	} {
		q := storage.Query{Paths: findQuery, Held: h}
		wantFound(t, q, find(t, b, q), need, all)
	}

	// One path at a time, each way.
	for _, p := range findQuery {
		for _, h := range []storage.Held{{}, bigHeld(10_000)} {
			q := storage.Query{Paths: []string{p}, Held: h}
			wantFound(t, q, find(t, b, q), needed(all, q.Paths), all)
		}
	}

	// No paths to write: nothing is needed.
	q := storage.Query{Paths: []string{}, Held: bigHeld(10_000)}
	wantFound(t, q, find(t, b, q), nil, all)
}

// Paths by the thousand, against a catalog of about as many records (a
// root replaced): what is needed is reported still.
func testFindManyPaths(t *testing.T, b storage.Backend) {
	all := findRoot(t, b)
	paths := slices.Clone(findQuery)
	for i := range 2500 {
		paths = append(paths, fmt.Sprintf("new/%05d.bin", i))
	}
	slices.Sort(paths)
	need := needed(all, paths)
	for _, h := range []storage.Held{{}, held(paths), bigHeld(4000), bigHeld(100_000)} {
		q := storage.Query{Paths: paths, Held: h}
		wantFound(t, q, find(t, b, q), need, all)
	}
}

// Where a backend holds both an object and objects under its path (S3:
// keys "s" and "s/t"), a write of that path must know of both. A backend
// that refuses the second (a file cannot be a folder) has nothing to check.
func testFindObjectAndObjectsUnder(t *testing.T, b storage.Backend) {
	put(t, b, "s", []byte("s"))
	if _, err := b.Put(t.Context(), "s/t", strings.NewReader("t"), 1, storage.PutOptions{}); err != nil {
		t.Skipf("the backend holds no object under an object: %v", err)
	}
	put(t, b, "s/u/v", []byte("v"))
	put(t, b, "w/x", []byte("x"))
	put(t, b, "w", []byte("w")) // after: an object where a folder of "w/x" is
	all := listAll(t, b)
	for _, paths := range [][]string{{"s"}, {"s/t"}, {"w/x/y"}, {"s", "w/x/y"}} {
		need := needed(all, paths)
		for _, h := range []storage.Held{{}, bigHeld(10_000)} {
			q := storage.Query{Paths: paths, Held: h}
			wantFound(t, q, find(t, b, q), need, all)
		}
	}
	if n := len(needed(all, []string{"s"})); n != 3 {
		t.Fatalf("the case is wrong: %d objects needed for \"s\", want 3", n)
	}
}

// A cancelled context fails Find, whichever way it would take.
func testFindCancelled(t *testing.T, b storage.Backend) {
	findRoot(t, b)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, q := range []storage.Query{
		{},
		{Held: bigHeld(10_000)},
		{Paths: findQuery},
		{Paths: findQuery, Held: bigHeld(10_000)},
		{Paths: []string{"e.txt"}, Held: bigHeld(10_000)}, // one object, looked up
	} {
		if err := b.Find(ctx, q, func(storage.ObjectInfo) error { return nil }); err == nil {
			t.Errorf("Find(%s) with a cancelled context succeeded", describe(q))
		}
	}
}

// fn's error ends Find, which returns it.
func testFindStopsOnError(t *testing.T, b storage.Backend) {
	findRoot(t, b)
	stop := errors.New("stop here")
	for _, q := range []storage.Query{
		{},
		{Held: bigHeld(10_000)},
		{Paths: findQuery},
		{Paths: findQuery, Held: bigHeld(10_000)},
	} {
		if err := b.Find(t.Context(), q, func(storage.ObjectInfo) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("Find(%s) = %v, want the callback's error", describe(q), err)
		}
	}
}
