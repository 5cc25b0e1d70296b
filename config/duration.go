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

// ParseDuration accepts a Go duration ("90m", "1h30m"), whole days ("30d")
// or days followed by a Go duration ("1d12h"). Every duration distributor
// reads, in the file, the environment or a flag, goes through it.
func ParseDuration(s string) (Duration, error) {
	if n, rest, ok := strings.Cut(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" && !strings.ContainsAny(rest, "+-") {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > math.MaxInt64/int64(day) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		var extra time.Duration
		if rest != "" {
			if extra, err = time.ParseDuration(rest); err != nil {
				return 0, invalidDuration(s)
			}
		}
		total := time.Duration(days) * day
		if extra > math.MaxInt64-total {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		return Duration(total + extra), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidDuration(s)
	}
	return Duration(d), nil
}

func invalidDuration(s string) error {
	return fmt.Errorf("invalid duration %q: use a Go duration like \"90m\" or \"720h\", or whole days like \"30d\"", s)
}

// String prints a day or more as days and the rest ("30d", "1d12h",
// "7d30m"), as ParseDuration reads them, less than a day as a Go
// duration, and zero as "0" (which is also how command-line help knows a
// flag's default is none), so that a printed value parses back to the
// same duration.
func (d Duration) String() string {
	td := time.Duration(d)
	if td == 0 {
		return "0"
	}
	if td < day {
		return td.String()
	}
	days := strconv.FormatInt(int64(td/day), 10) + "d"
	rest := td % day
	if rest == 0 {
		return days
	}

	// The rest without zero units: "12h0m0s" is "12h".
	s := rest.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return days + s
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

// Set makes *Duration a command-line flag value (pflag.Value): duration
// flags take what the file takes.
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Type names the flag's value in help.
func (d *Duration) Type() string { return "duration" }
