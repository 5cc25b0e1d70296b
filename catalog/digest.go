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
// (Hand-written: it runs for every record of every catalog read and written,
// and a regexp made it a tenth of planning time.)
func ValidDigest(d string) bool {
	if len(d) != len(digestPrefix)+64 || d[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
