package controller

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The web page's numbers, as text. Each is the API's number rounded for
// reading: dollars to the cent, GPU-hours and GPUs to a tenth, queue times
// to their largest two units. The browser test reads them back and
// compares them with the API's JSON within that rounding.

// uiDollars is d as "$1,234.56".
func uiDollars(d float64) string {
	s := uiGroup(strconv.FormatFloat(math.Abs(d), 'f', 2, 64))
	if math.Round(d*100) < 0 {
		return "-$" + s
	}
	return "$" + s
}

// uiTenths is x with one decimal, in groups of thousands: "1,234.5".
func uiTenths(x float64) string {
	s := uiGroup(strconv.FormatFloat(math.Abs(x), 'f', 1, 64))
	if math.Round(x*10) < 0 {
		return "-" + s
	}
	return s
}

// uiCount is n in groups of thousands: "12,345".
func uiCount(n int) string {
	if n < 0 {
		return "-" + uiGroup(strconv.Itoa(-n))
	}
	return uiGroup(strconv.Itoa(n))
}

// uiGroup puts commas between the thousands of a non-negative number's
// digits before its decimal point.
func uiGroup(s string) string {
	whole, frac, dot := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if dot {
		b.WriteString("." + frac)
	}
	return b.String()
}

// uiQueue is a queue time of seconds in its largest two units ("42s",
// "4m 10s", "2h 05m", "3d 4h"), or "-" when no job's is known (jobs 0).
func uiQueue(seconds float64, jobs int) string {
	if jobs == 0 {
		return "-"
	}
	s := int64(math.Round(seconds))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	case s < 86400:
		m := (s + 30) / 60
		return fmt.Sprintf("%dh %02dm", m/60, m%60)
	}
	h := (s + 1800) / 3600
	return fmt.Sprintf("%dd %dh", h/24, h%24)
}

// uiLevel names a forecast quantile: "p50", "p97.5".
func uiLevel(q float64) string {
	return "p" + strconv.FormatFloat(math.Round(q*1000)/10, 'f', -1, 64)
}

// uiTime is t in UTC, to the minute: "Mon 30 Nov 15:04 UTC".
func uiTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("Mon 02 Jan 15:04 UTC")
}

// uiAgo says how long before now t was: "2m ago".
func uiAgo(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "just now"
	}
	return uiQueue(d.Seconds(), 1) + " ago"
}
