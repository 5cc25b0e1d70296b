package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in YAML either as a Go duration
// ("720h", "90m") or as whole days ("30d"), which Go durations lack.
type Duration time.Duration

const day = 24 * time.Hour

// ParseDuration accepts a Go duration or a whole number of days ("30d").
func ParseDuration(s string) (Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > math.MaxInt64/int64(day) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		return Duration(time.Duration(days) * day), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a Go duration like \"90m\" or \"720h\", or whole days like \"30d\"", s)
	}
	return Duration(d), nil
}

// String prints whole days as "30d" and anything else as a Go duration, so
// that a printed value parses back to the same duration.
func (d Duration) String() string {
	td := time.Duration(d)
	if td > 0 && td%day == 0 {
		return strconv.FormatInt(int64(td/day), 10) + "d"
	}
	return td.String()
}

// MarshalText writes String's form (used by JSON and YAML encoders).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what ParseDuration accepts.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
