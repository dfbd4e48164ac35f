package fleet

import (
	"strings"
	"testing"
)

func TestValidLabel(t *testing.T) {
	for _, tt := range []struct {
		label, want string
	}{
		{"", ""},
		{"vision-research", ""},
		{"ml.team_2:prod@us+eu", ""},
		{strings.Repeat("a", MaxLabelLen), ""},
		{strings.Repeat("a", MaxLabelLen+1), "65 bytes, at most 64"},
		{"ml research", `"ml research": want letters, digits and ._-:@+ only`},
		{"a/b", `"a/b": want letters, digits and ._-:@+ only`},
		{"idle", `"idle" is the reports' word`},
		{"other", `"other" is the reports' word`},
		{"unattributed", `"unattributed" is the reports' word`},
	} {
		if got := ValidLabel(tt.label); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("ValidLabel(%q) = %q, want %q", tt.label, got, tt.want)
		}
	}
}
