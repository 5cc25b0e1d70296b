package engine

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// The shard a path lives in is part of the on-disk index: it must not move
// when the code computing it changes.
func TestFingerprintsFileIsFNV1aModShards(t *testing.T) {
	for _, p := range []string{"a.txt", "data/f042.txt", "dir00/file00000.bin", "ü/é.txt", ""} {
		h := fnv.New32a()
		h.Write([]byte(p))
		want := fmt.Sprintf("%s/%02x", FingerprintsDir, h.Sum32()%fingerprintShards)
		if got := FingerprintsFile(p); got != want {
			t.Errorf("FingerprintsFile(%q) = %q, want %q", p, got, want)
		}
	}
}
