package fleet

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// durationUnits maps each unit ParseDuration accepts to its length in
// nanoseconds: Go's time.ParseDuration units plus d (24h) and w (7d).
var durationUnits = map[string]uint64{
	"ns": uint64(time.Nanosecond),
	"us": uint64(time.Microsecond),
	"µs": uint64(time.Microsecond), // U+00B5 micro sign
	"μs": uint64(time.Microsecond), // U+03BC Greek small letter mu
	"ms": uint64(time.Millisecond),
	"s":  uint64(time.Second),
	"m":  uint64(time.Minute),
	"h":  uint64(time.Hour),
	"d":  uint64(24 * time.Hour),
	"w":  uint64(7 * 24 * time.Hour),
}

// DurationForm describes the accepted duration syntax in error messages.
const DurationForm = `a duration such as "90s", "10m", "1h30m", "14d" or "1d12h" (units ns, us, ms, s, m, h, d = 24h, w = 7d)`

// ParseDuration parses a duration such as "90s", "1h30m", "14d" or "1d12h".
// It accepts what time.ParseDuration accepts (an optional sign, then a
// sequence of decimal numbers, each with an optional fraction and a unit)
// plus the units "d" (24 hours) and "w" (7 days). A duration that does not
// fit in a time.Duration is an error.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("invalid duration %q", orig)
	}
	var total uint64
	for s != "" {
		// The number: digits, optionally followed by '.' and more digits.
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		intPart := s[:i]
		s = s[i:]
		fracPart := ""
		if s != "" && s[0] == '.' {
			s = s[1:]
			j := 0
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			fracPart = s[:j]
			s = s[j:]
		}
		if intPart == "" && fracPart == "" {
			return 0, fmt.Errorf("invalid duration %q: expected a number", orig)
		}
		// The unit: everything up to the next number.
		j := 0
		for j < len(s) && s[j] != '.' && !isDigit(s[j]) {
			j++
		}
		unitName := s[:j]
		s = s[j:]
		if unitName == "" {
			return 0, fmt.Errorf("invalid duration %q: missing unit", orig)
		}
		unit, ok := durationUnits[unitName]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q", orig, unitName)
		}
		v, err := parseDigits(intPart)
		if err != nil || v > math.MaxInt64/unit {
			return 0, fmt.Errorf("invalid duration %q: out of range", orig)
		}
		v *= unit
		if fracPart != "" {
			// Like time.ParseDuration: digits beyond what a uint64 holds
			// are dropped, which loses less than a nanosecond per unit.
			var f, scale uint64 = 0, 1
			for k := 0; k < len(fracPart) && scale < 1e18; k++ {
				f = f*10 + uint64(fracPart[k]-'0')
				scale *= 10
			}
			v += uint64(float64(f) * (float64(unit) / float64(scale)))
		}
		total += v
		if v > math.MaxInt64 || total > math.MaxInt64 {
			return 0, fmt.Errorf("invalid duration %q: out of range", orig)
		}
	}
	if neg {
		return -time.Duration(total), nil
	}
	return time.Duration(total), nil
}

// parseDigits parses a non-negative decimal number; "" is 0.
func parseDigits(s string) (uint64, error) {
	var v uint64
	for i := 0; i < len(s); i++ {
		if v > (math.MaxUint64-9)/10 {
			return 0, errors.New("overflow")
		}
		v = v*10 + uint64(s[i]-'0')
	}
	return v, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// FormatDurationExact formats d as FormatDuration does where that is
// exact ("10m", "14d"), and as Go does otherwise ("1m30s"): either way
// ParseDuration reads d back. For machine-read output, such as JSON.
func FormatDurationExact(d time.Duration) string {
	s := FormatDuration(d)
	if back, err := ParseDuration(s); err == nil && back == d {
		return s
	}
	return d.String()
}

// FormatDuration formats a duration the way a person reads it, in a form
// the config's durations accept: "45s", "35m", "2h", "2h5m", "3d4h". Durations of a
// minute or more are rounded to the minute, of two days or more to the hour.
func FormatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + FormatDuration(-d)
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Round(time.Minute)/time.Minute))
	case d >= 48*time.Hour:
		d = d.Round(time.Hour)
		days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	}
	d = d.Round(time.Minute)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	if m == 0 {
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}
