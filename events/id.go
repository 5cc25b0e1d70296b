package events

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewEventID returns a random, URL-safe event id that sorts by creation
// time: 12 hex digits of Unix milliseconds then 20 random hex digits
// (80 bits), e.g. "0197a3c1e2f04b9d2c7e5a11f03d6e88".
func NewEventID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}
