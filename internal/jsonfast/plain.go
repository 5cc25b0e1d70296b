package jsonfast

// Bit masks for the eight bytes of a word.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// PlainPrefix returns the length of s's longest prefix that a JSON string
// holds as it is: printable ASCII other than '"' and '\\'. Readers and
// writers of strings skip that prefix eight bytes at a time (most of a
// catalog's strings: paths, digests, ids and times are plain through).
func PlainPrefix[T ~string | ~[]byte](s T) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56

		// A byte at or above 0x80, below 0x20, equal to '"' or to '\\'
		// sets its high bit in one of these (a borrow can set a higher
		// byte's too, only after a byte that matched: the loop below then
		// finds the first).
		q, bs := w^('"'*lows), w^('\\'*lows)
		if (w|(w-0x20*lows)|((q-lows)&^q)|((bs-lows)&^bs))&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			break
		}
	}
	return i
}
