package catalog_test

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/distributor/distributor/catalog"
)

func TestDigestRoundTrip(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("hello\n"))
	d := catalog.Digest(sum[:])
	const want = "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	if d != want {
		t.Fatalf("Digest = %q, want %q", d, want)
	}
	got, ok := catalog.DigestSum(d)
	if !ok || !bytes.Equal(got, sum[:]) {
		t.Fatalf("DigestSum(%q) = %x, %v; want %x, true", d, got, ok, sum)
	}
}

func TestDigestSumRefusesInvalid(t *testing.T) {
	t.Parallel()
	for _, d := range []string{
		"",
		"md5:abc",
		"sha256:",
		"sha256:5891B5B522D5DF086D0FF0B110FBD9D21BB4FC7163AF34D08286A2E846F6BE03", // upper case
		"sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be0",  // 63 digits
		"SHA256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
	} {
		if sum, ok := catalog.DigestSum(d); ok || sum != nil {
			t.Errorf("DigestSum(%q) = %x, %v; want nil, false", d, sum, ok)
		}
	}
}
