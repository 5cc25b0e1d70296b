package engine

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
)

// A fingerprint shard rewritten in place may be read torn: any mix of two
// summed copies (one written over the other, cut anywhere, before or
// after the truncation, or zeros where a crash lost the write) reads as
// exactly one of the two copies or as no entry at all, never as an entry
// that neither copy holds.
func TestTornFingerprintShardNeverVouches(t *testing.T) {
	t.Parallel()
	a, b := newFingerprints(1), newFingerprints(1)
	var paths []string
	for i := range 12 {
		p := fmt.Sprintf("d/f%02d.txt", i)
		paths = append(paths, p)
		a.entries[p] = known{fingerprint: fmt.Sprintf("%d:10:170000000%d", 1000+i, i), sha256: fmt.Sprintf("sha256:%064x", i)}
		// b: other versions of some outputs, and fewer of them (shorter).
		if i%3 != 0 {
			b.entries[p] = known{fingerprint: fmt.Sprintf("%d:9:180000000%d", 2000+i, i), sha256: fmt.Sprintf("sha256:%064x", 100+i)}
		}
	}
	var bPaths []string
	for p := range b.entries {
		bPaths = append(bPaths, p)
	}
	oldCopy, newCopy := a.encode(paths, a.entries), b.encode(bPaths, b.entries)
	want := func(name string, data []byte) {
		t.Helper()
		got := map[string]known{}
		entries, _ := parseFingerprints(bytes.Clone(data), nil)
		for _, en := range entries {
			got[en.path] = en.known
		}
		var whole *fingerprints
		if bytes.Equal(data, oldCopy) {
			whole = a
		} else if bytes.Equal(data, newCopy) {
			whole = b
		}
		if whole != nil && !maps.Equal(got, whole.entries) {
			t.Fatalf("%s: a whole copy read as %d entries, want its %d", name, len(got), len(whole.entries))
		}
		if whole == nil && len(got) != 0 {
			t.Fatalf("%s: a torn copy read as %d entries, want none", name, len(got))
		}
	}
	// A shard without the sum line (written whole by older versions)
	// reads as none: rewritten in place, a torn copy of it might keep
	// its head and so look unsummed.
	legacy := []byte(fingerprintsHeader + "\nsha256:aa\t1:2:3\tx.txt\n")
	for _, pair := range [][2][]byte{{oldCopy, newCopy}, {newCopy, oldCopy}, {legacy, newCopy}} {
		under, over := pair[0], pair[1]
		for k := 0; k <= len(over); k++ {
			// Written up to k over the old bytes, not yet truncated.
			mix := append(append([]byte(nil), over[:k]...), under[min(k, len(under)):]...)
			want(fmt.Sprintf("cut at %d of %d over %d", k, len(over), len(under)), mix)
			// Truncated to the new length, the rest of the write lost.
			lost := append(append([]byte(nil), over[:k]...), make([]byte, len(over)-k)...)
			want(fmt.Sprintf("zeros after %d of %d", k, len(over)), lost)
			want(fmt.Sprintf("prefix of %d of %d", k, len(over)), over[:k])
		}
	}
}
