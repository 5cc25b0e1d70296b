package engine_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
)

// A publication of a few outputs to a large root (its catalog streamed)
// reads each fingerprint shard it rewrites once, when it rewrites it, and
// the shard then holds exactly the root's other entries, the new entries
// of what it wrote and none of what it dropped, in the form a whole
// rewrite gives (sorted lines, summed).
func TestStreamedPublicationReadsEachShardItRewritesOnce(t *testing.T) {
	h := newHarness(t)
	h.Service.Engine.WholeCatalog = -1
	plain, base := newLocalRoot(t)
	root := newCounting(plain)
	h.AddDest(named(base, "site", planner.Additive), root, pipeA)
	h.AddDest(named(base, "other", planner.Replacement), root, pipeB)
	files := map[string]string{}
	for i := range 1100 {
		files[fmt.Sprintf("d%d/f%04d.txt", i%5, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "site", "weatherreporter.v", files)

	// x/b3.txt, dropped, shares its shard with x/b1.txt, rewritten.
	if engine.FingerprintsFile("x/b3.txt", 2) != engine.FingerprintsFile("x/b1.txt", 2) {
		t.Fatal("the test's paths x/b1.txt and x/b3.txt are in different shards")
	}
	// Fewer outputs than four per shard: the publication reads only the
	// shards it rewrites.
	h.MustPublish(t1, pipeB, "other", "tides.v", map[string]string{"x/b1.txt": "1", "x/b2.txt": "2", "x/b3.txt": "3", "x/b5.txt": "5", "x/b6.txt": "6", "x/b7.txt": "7"})
	before := fingerprintEntries(t, base.Path)
	if len(before) != 1106 {
		t.Fatalf("%d fingerprint entries, want 1106", len(before))
	}

	root.Reset()
	changed := map[string]string{"x/b1.txt": "one", "x/b2.txt": "two", "x/b4.txt": "4", "x/b5.txt": "five", "x/b6.txt": "six", "x/b7.txt": "seven"}
	res := h.MustPublish(t2, pipeB, "other", "tides.v", changed)
	wantStrings(t, "written", itemPaths(res.Written), slices.Sorted(maps.Keys(changed)))
	var read []string
	for _, p := range root.Calls("ReadVersion") {
		if strings.HasPrefix(p, engine.FingerprintsDir+"/") {
			read = append(read, strings.TrimPrefix(p, engine.FingerprintsDir+"/"))
		}
	}
	wantStrings(t, "shards read", read, []string{"2-00", "2-01"})

	after := fingerprintEntries(t, base.Path)
	want := map[string]string{}
	for p, e := range before {
		if !strings.HasPrefix(p, "x/") {
			want[p] = e
		}
	}
	for p := range changed {
		e, ok := after[p]
		if !ok || e == before[p] {
			t.Fatalf("entry of %s %q, want a new one (was %q)", p, e, before[p])
		}
		want[p] = e
	}
	if len(after) != len(want) {
		t.Fatalf("%d fingerprint entries, want %d (x/b3.txt's gone)", len(after), len(want))
	}
	for p, e := range want {
		if after[p] != e {
			t.Fatalf("entry of %s %q, want %q", p, after[p], e)
		}
	}
	wantShardsInEncodedForm(t, base.Path)
}

// A shard rewritten for a few entries keeps its other lines unchecked,
// but not when it holds more lines than its share of the catalog
// (entries of paths no longer recorded): then every line is checked and
// those of unrecorded paths go.
func TestStreamedPublicationDropsUnrecordedEntriesPastTheShardsShare(t *testing.T) {
	h := newHarness(t)
	h.Service.Engine.WholeCatalog = -1
	plain, base := newLocalRoot(t)
	h.AddDest(named(base, "site", planner.Additive), plain, pipeA)
	h.AddDest(named(base, "other", planner.Replacement), plain, pipeB)
	files := map[string]string{}
	for i := range 1100 {
		files[fmt.Sprintf("d%d/f%04d.txt", i%5, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "site", "weatherreporter.v", files)
	h.MustPublish(t1, pipeB, "other", "tides.v", map[string]string{"x/b1.txt": "1"})

	// Entries of 400 paths the catalog does not record, in x/b1.txt's
	// shard (about 550 lines): past its share.
	shard := filepath.Join(base.Path, filepath.FromSlash(engine.FingerprintsFile("x/b1.txt", 2)))
	data, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[2:]
	for i, planted := 0, 0; planted < 400; i++ {
		if p := fmt.Sprintf("gone/f%05d.txt", i); engine.FingerprintsFile(p, 2) == engine.FingerprintsFile("x/b1.txt", 2) {
			lines = append(lines, "sha256:"+strings.Repeat("0", 64)+"\t1:2:3\t"+p)
			planted++
		}
	}
	writeShard(t, shard, lines)
	if n := len(fingerprintEntries(t, base.Path)); n != 1101+400 {
		t.Fatalf("%d entries planted, want %d", n, 1101+400)
	}

	h.MustPublish(t2, pipeB, "other", "tides.v", map[string]string{"x/b1.txt": "one"})
	for p := range fingerprintEntries(t, base.Path) {
		if strings.HasPrefix(p, "gone/") {
			t.Fatalf("the rewritten shard keeps the entry of %s, which the catalog does not record", p)
		}
	}
	wantShardsInEncodedForm(t, base.Path)
}

// writeShard writes a shard of the given entry lines, in path order and
// summed (as a whole rewrite renders it).
func writeShard(t *testing.T, file string, lines []string) {
	t.Helper()
	path := func(l string) string { return l[strings.LastIndexByte(l, '\t')+1:] }
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(path(a), path(b)) })
	body := strings.Join(lines, "\n") + "\n"
	sum := sha256.Sum256([]byte(body))
	if err := os.WriteFile(file, []byte("distributor-fingerprints 1\n#sha256 "+hex.EncodeToString(sum[:])+"\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantShardsInEncodedForm checks that every shard is as a whole rewrite
// renders it: the header, the sum of the lines, the lines in path order.
func wantShardsInEncodedForm(t *testing.T, dir string) {
	t.Helper()
	shards, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(engine.FingerprintsDir), "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		data, err := os.ReadFile(sh)
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := strings.Cut(string(data), "\n")
		sumLine, body, _ := strings.Cut(body, "\n")
		sum := sha256.Sum256([]byte(body))
		if head != "distributor-fingerprints 1" || sumLine != "#sha256 "+hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: head %q %q, want the header and the sum of its lines", sh, head, sumLine)
		}
		var paths []string
		for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			paths = append(paths, l[strings.LastIndexByte(l, '\t')+1:])
		}
		if !slices.IsSorted(paths) || len(slices.Compact(slices.Clone(paths))) != len(paths) {
			t.Fatalf("%s: lines not in path order", sh)
		}
	}
}

// A shard torn or damaged when a publication to a large root rewrites it
// is not spliced under a fresh sum: its lines go, and the shard holds only
// the entries the publication wrote (the others cost a hash later).
func TestStreamedPublicationCopiesNoLineOfADamagedShard(t *testing.T) {
	h := newHarness(t)
	h.Service.Engine.WholeCatalog = -1
	plain, base := newLocalRoot(t)
	h.AddDest(named(base, "site", planner.Additive), plain, pipeA)
	h.AddDest(named(base, "other", planner.Replacement), plain, pipeB)
	files := map[string]string{}
	for i := range 1100 {
		files[fmt.Sprintf("d%d/f%04d.txt", i%5, i)] = fmt.Sprintf("file %d\n", i)
	}
	h.MustPublish(t1, pipeA, "site", "weatherreporter.v", files)
	h.MustPublish(t1, pipeB, "other", "tides.v", map[string]string{"x/b1.txt": "1"})

	// One byte of another entry changed, the sum left: the shard no longer
	// matches its sum.
	shard := filepath.Join(base.Path, filepath.FromSlash(engine.FingerprintsFile("x/b1.txt", 2)))
	data, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "\td")
	data[i+1] = 'e' // d0/… → e0/…
	if err := os.WriteFile(shard, data, 0o644); err != nil {
		t.Fatal(err)
	}

	h.MustPublish(t2, pipeB, "other", "tides.v", map[string]string{"x/b1.txt": "one"})
	got, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")[2:]
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "\tx/b1.txt") {
		t.Fatalf("the damaged shard was rewritten with %d lines, want only x/b1.txt's:\n%s", len(lines), got)
	}
	wantShardsInEncodedForm(t, base.Path)
}
