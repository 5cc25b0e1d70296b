package engine

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A shard rewritten for a few changed entries is spliced from its stored
// bytes: on random shards, drops and adds (in any order), the splice is byte for byte
// the shard encode renders from the entries left, and it copies every
// line it keeps.
func TestSpliceShardIsTheWholeRewrite(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	entry := func(i, v int) known {
		return known{fingerprint: fmt.Sprintf("%d:%d:17000%d", 1000+i, v, i), sha256: fmt.Sprintf("sha256:%064x", i*7+v)}
	}
	for round := range 300 {
		n := rng.IntN(60)
		stored := map[string]known{}
		for i := range n {
			stored[fmt.Sprintf("d%d/f%03d.txt", i%3, rng.IntN(200))] = entry(i, 0)
		}
		data := newFingerprints(1).encode(slices.Collect(maps.Keys(stored)), stored)

		// drop: stored paths and absent ones; add: new versions of stored
		// paths (some also dropped) and new paths.
		var drop, add []string
		entries := map[string]known{}
		want := map[string]known{}
		for p, k := range stored {
			want[p] = k
		}
		for range rng.IntN(12) {
			p := fmt.Sprintf("d%d/f%03d.txt", rng.IntN(4), rng.IntN(200))
			drop = append(drop, p)
			delete(want, p)
		}
		for i := range rng.IntN(12) {
			p := fmt.Sprintf("d%d/f%03d.txt", rng.IntN(4), rng.IntN(200))
			if rng.IntN(2) == 0 {
				drop = append(drop, p) // loaded and set again: in both
			}
			add = append(add, p)
			entries[p] = entry(i, 1+round)
		}
		for _, p := range add {
			want[p] = entries[p]
		}
		slices.Sort(drop)
		slices.Sort(add)
		add = slices.Compact(add)
		rng.Shuffle(len(add), func(i, j int) { add[i], add[j] = add[j], add[i] }) // as a map gives them

		got, kept, ok := spliceShard(data, drop, add, entries)
		if !ok {
			t.Fatalf("round %d: a shard in encode's form was not spliced", round)
		}
		wantBytes := newFingerprints(1).encode(slices.Collect(maps.Keys(want)), want)
		if !bytes.Equal(got, wantBytes) {
			t.Fatalf("round %d: spliced shard\n%s\nwant the whole rewrite\n%s", round, got, wantBytes)
		}
		if keptWant := len(want) - len(add); kept != keptWant {
			t.Fatalf("round %d: %d lines copied, want %d", round, kept, keptWant)
		}
	}
}

// A stored shard that is torn, damaged or missing gives the splice no
// line: the shard holds only the entries added.
func TestSpliceShardKeepsNoLineOfATornShard(t *testing.T) {
	t.Parallel()
	stored := map[string]known{}
	var paths []string
	for i := range 20 {
		p := fmt.Sprintf("d/f%02d.txt", i)
		paths = append(paths, p)
		stored[p] = known{fingerprint: fmt.Sprintf("%d:1:2", i), sha256: fmt.Sprintf("sha256:%064x", i)}
	}
	whole := newFingerprints(1).encode(paths, stored)
	entries := map[string]known{"d/f05.txt": {fingerprint: "9:9:9", sha256: "sha256:" + strings.Repeat("e", 64)}}
	onlyAdded := newFingerprints(1).encode([]string{"d/f05.txt"}, entries)
	flipped := bytes.Clone(whole)
	flipped[len(flipped)-3] ^= 1
	for name, data := range map[string][]byte{
		"cut":      whole[:len(whole)-10],
		"flipped":  flipped,
		"unsummed": []byte(fingerprintsHeader + "\n" + strings.Join(strings.Split(string(whole), "\n")[2:], "\n")),
		"missing":  nil,
	} {
		got, kept, ok := spliceShard(data, nil, []string{"d/f05.txt"}, entries)
		if !ok || kept != 0 || !bytes.Equal(got, onlyAdded) {
			t.Fatalf("%s: spliced (ok %v, %d kept)\n%s\nwant only the entry added\n%s", name, ok, kept, got, onlyAdded)
		}
	}
}

// A summed shard not in encode's form (lines out of order, a duplicate,
// one that parseFingerprints skips or trims) is not spliced: the caller
// rewrites it from a parse, which leaves such lines.
func TestSpliceShardRefusesAShardNotInEncodesForm(t *testing.T) {
	t.Parallel()
	sha := "sha256:" + strings.Repeat("a", 64)
	for name, lines := range map[string]string{
		"out of order":    sha + "\t1:1:1\tb.txt\n" + sha + "\t1:1:1\ta.txt\n",
		"duplicate":       sha + "\t1:1:1\ta.txt\n" + sha + "\t2:1:1\ta.txt\n",
		"carriage return": sha + "\t1:1:1\ta.txt\r\n",
		"empty line":      sha + "\t1:1:1\ta.txt\n\n",
		"one tab":         sha + "\ta.txt\n",
		"no path":         sha + "\t1:1:1\t\n",
		"no last newline": sha + "\t1:1:1\ta.txt",
	} {
		data := sumShard(append(make([]byte, len(fingerprintsHeader)+1+len(fingerprintsSum)+64+1), lines...), len(fingerprintsHeader)+1+len(fingerprintsSum)+64+1)
		if _, ok := shardBody(data); !ok {
			t.Fatalf("%s: the test's shard is not summed", name)
		}
		if _, _, ok := spliceShard(data, nil, nil, nil); ok {
			t.Fatalf("%s: spliced", name)
		}
	}
}
