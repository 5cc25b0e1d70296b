package catalog_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
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

// ValidDigest, eight bytes at a time, answers as a check of each byte
// does: for every byte value at every position of the hex part, and for
// lengths and prefixes around the valid ones.
func TestValidDigestEveryByte(t *testing.T) {
	valid := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	byByte := func(d string) bool {
		if len(d) != 71 || d[:7] != "sha256:" {
			return false
		}
		for i := 7; i < len(d); i++ {
			if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	if !catalog.ValidDigest(valid) {
		t.Fatalf("%s: invalid", valid)
	}
	for pos := 7; pos < len(valid); pos++ {
		for c := range 256 {
			d := []byte(valid)
			d[pos] = byte(c)
			if got, want := catalog.ValidDigest(string(d)), byByte(string(d)); got != want {
				t.Fatalf("byte %#x at %d: ValidDigest %v, want %v", c, pos, got, want)
			}
		}
	}
	for _, d := range []string{"", "sha256:", valid[:70], valid + "0", "SHA256:" + valid[7:], "sha256-" + valid[7:], "sha256:" + strings.ToUpper(valid[7:])} {
		if catalog.ValidDigest(d) {
			t.Errorf("%q: valid", d)
		}
	}
}
