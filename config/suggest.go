package config

import (
	"fmt"
	"strings"

	"github.com/agext/levenshtein"
)

// suggestion is the one of names closest to given, by Levenshtein
// distance and ignoring case, when it is close: fewer than 3 edits away,
// as HCL's own "Did you mean" for attribute names. The first of the
// closest wins; "" when none is close.
func suggestion(given string, names []string) string {
	best, bestDist := "", 3
	for _, name := range names {
		if d := levenshtein.Distance(strings.ToLower(given), strings.ToLower(name), nil); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// didYouMean is ` Did you mean "NAME"?` for the name of names closest to
// given (see suggestion), to end an error's detail; "" when none is close.
func didYouMean(given string, names []string) string {
	if s := suggestion(given, names); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}
