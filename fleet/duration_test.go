package fleet

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"90s", 90 * time.Second, true},
		{"10m", 10 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"14d", 14 * day, true},
		{"2w", 14 * day, true},
		{"1d12h", 36 * time.Hour, true},
		{"1w1d1h1m1s1ms1us1ns", 8*day + time.Hour + time.Minute + time.Second + time.Millisecond + time.Microsecond + time.Nanosecond, true},
		{"1.5h", 90 * time.Minute, true},
		{".5d", 12 * time.Hour, true},
		{"1.d", day, true},
		{"-5m", -5 * time.Minute, true},
		{"+5m", 5 * time.Minute, true},
		{"2µs", 2 * time.Microsecond, true},
		{"2μs", 2 * time.Microsecond, true},
		{"15250w", 15250 * 7 * day, true},
		{"2562047h47m16.854775807s", time.Duration(1<<63 - 1), true},
		{"", 0, false},
		{"-", 0, false},
		{"10", 0, false},
		{"10 minutes", 0, false},
		{"5x", 0, false},
		{"1h30", 0, false},
		{".d", 0, false},
		{"d", 0, false},
		{"1y", 0, false},
		{"15251w", 0, false},
		{"2562047h47m16.854775808s", 0, false},
		{"99999999999999999999999s", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		// Where Go's parser accepts the input, both agree.
		if goDur, goErr := time.ParseDuration(tt.in); goErr == nil && (err != nil || got != goDur) {
			t.Errorf("ParseDuration(%q) = %v, %v; time.ParseDuration gives %v", tt.in, got, err, goDur)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {45 * time.Second, "45s"}, {35*time.Minute + 20*time.Second, "35m"}, {2 * time.Hour, "2h"},
		{2*time.Hour + 5*time.Minute, "2h5m"}, {76 * time.Hour, "3d4h"}, {14 * 24 * time.Hour, "14d"}, {-90 * time.Second, "-2m"},
	} {
		got := FormatDuration(tt.d)
		if got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
		if back, err := ParseDuration(got); err != nil || back != tt.d.Round(durationRounding(tt.d)) {
			t.Errorf("ParseDuration(%q) = %v, %v: does not round-trip", got, back, err)
		}
	}
}

// durationRounding is the precision FormatDuration keeps for d.
func durationRounding(d time.Duration) time.Duration {
	switch d = max(d, -d); {
	case d < time.Minute:
		return time.Second
	case d >= 48*time.Hour:
		return time.Hour
	}
	return time.Minute
}

func TestFormatDurationExact(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {10 * time.Minute, "10m"}, {90 * time.Second, "1m30s"}, {14 * 24 * time.Hour, "14d"},
		{36 * time.Hour, "36h"}, {50 * time.Hour, "2d2h"}, {1500 * time.Millisecond, "1.5s"}, {-5 * time.Minute, "-5m"}, {time.Nanosecond, "1ns"},
		{50*time.Hour + time.Minute, "50h1m0s"}, {time.Duration(1<<63 - 1), "2562047h47m16.854775807s"},
	} {
		got := FormatDurationExact(tt.d)
		if got != tt.want {
			t.Errorf("FormatDurationExact(%v) = %q, want %q", tt.d, got, tt.want)
		}
		if back, err := ParseDuration(got); err != nil || back != tt.d {
			t.Errorf("ParseDuration(%q) = %v, %v: does not round-trip", got, back, err)
		}
	}
}
