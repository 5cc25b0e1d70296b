package jsonfast

import (
	"math/rand/v2"
	"testing"
)

func plainPrefixByByte(s []byte) int {
	for i, c := range s {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return len(s)
}

// PlainPrefix agrees with a byte-by-byte scan for every byte value at
// every position of words and tails, and on random strings.
func TestPlainPrefixMatchesAByteScan(t *testing.T) {
	check := func(s []byte) {
		t.Helper()
		if got, want := PlainPrefix(s), plainPrefixByByte(s); got != want {
			t.Fatalf("PlainPrefix(%q) = %d, want %d", s, got, want)
		}
		if got, want := PlainPrefix(string(s)), plainPrefixByByte(s); got != want {
			t.Fatalf("PlainPrefix(string %q) = %d, want %d", s, got, want)
		}
	}
	for n := 0; n <= 20; n++ {
		for at := 0; at < n; at++ {
			for c := range 256 {
				s := make([]byte, n)
				for i := range s {
					s[i] = 'a' + byte(i%26)
				}
				s[at] = byte(c)
				check(s)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab/.:-_09 \"\\\x00\x1f\x20\x7f\x80\xff\xc3\xa9")
	for range 20000 {
		s := make([]byte, rng.IntN(40))
		for i := range s {
			if rng.IntN(8) == 0 {
				s[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				s[i] = byte(0x21 + rng.IntN(0x5e))
			}
		}
		check(s)
	}
}
