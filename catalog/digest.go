package catalog

import (
	"encoding/hex"
)

// digestPrefix starts every digest distributor writes or reads.
const digestPrefix = "sha256:"

// Digest is the digest of a SHA-256 sum as catalogs, manifests and events
// carry it: "sha256:" and the sum in lowercase hex.
func Digest(sum []byte) string {
	return digestPrefix + hex.EncodeToString(sum)
}

// DigestSum is the SHA-256 sum a digest names; false when d is not a valid
// digest (see ValidDigest).
func DigestSum(d string) ([]byte, bool) {
	if !ValidDigest(d) {
		return nil, false
	}
	sum, err := hex.DecodeString(d[len(digestPrefix):])
	return sum, err == nil
}

// ValidDigest reports whether d has the form sha256:<64 lowercase hex>.
// (Hand-written: it runs for every record of every catalog read and
// written, twice, and for every manifest entry; eight bytes at a time, it
// cost a third of what a loop over the bytes did.)
func ValidDigest(d string) bool {
	if len(d) != len(digestPrefix)+64 || d[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(d); i += 8 {
		if !lowerHex8(load8(d[i : i+8])) {
			return false
		}
	}
	return true
}

// load8 is the eight bytes of s, first byte lowest.
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// lowerHex8 reports whether each byte of x is one of 0-9a-f. Bytes below
// 0x80 (checked first) plus a constant of at most 0x50 carry into no
// neighbour, so each byte's top bit tells its own comparison: x+(0x80-lo)
// sets it when x >= lo, x+(0x7f-hi) when x > hi.
func lowerHex8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	if x&tops != 0 {
		return false
	}
	digit := (x + (0x80-'0')*ones) &^ (x + (0x7f-'9')*ones)
	letter := (x + (0x80-'a')*ones) &^ (x + (0x7f-'f')*ones)
	return (digit|letter)&tops == tops
}
