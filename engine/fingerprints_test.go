package engine

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// The shard a path lives in is part of the stored index: it must not move
// when the code computing it changes. 256 shards keep the names of the
// index before it was sized.
func TestFingerprintsFileIsFNV1aModShards(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 16, 256} {
		for _, p := range []string{"a.txt", "data/f042.txt", "dir00/file00000.bin", "ü/é.txt", ""} {
			h := fnv.New32a()
			h.Write([]byte(p))
			want := fmt.Sprintf("%s/%d-%02x", FingerprintsDir, shards, h.Sum32()%uint32(shards))
			if shards == 256 {
				want = fmt.Sprintf("%s/%02x", FingerprintsDir, h.Sum32()%256)
			}
			if got := FingerprintsFile(p, shards); got != want {
				t.Errorf("FingerprintsFile(%q, %d) = %q, want %q", p, shards, got, want)
			}
		}
	}
}

// About 1024 entries per shard, a power of two, at most 256 shards.
func TestFingerprintShardsFollowTheCatalogSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ outputs, shards int }{
		{0, 1}, {1, 1}, {1000, 1}, {1024, 1}, {1025, 2}, {2048, 2}, {2049, 4},
		{10_000, 16}, {100_000, 128}, {262_144, 256}, {1_000_000, 256}, {10_000_000, 256},
	} {
		if got := FingerprintShards(tc.outputs); got != tc.shards {
			t.Errorf("FingerprintShards(%d) = %d, want %d", tc.outputs, got, tc.shards)
		}
	}
}
