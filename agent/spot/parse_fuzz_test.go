package spot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

// FuzzParse feeds the two parsers arbitrary answers: they must never
// panic, an error must name its path, and what they accept must be a
// whole notice that says what the answer said.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"action":"terminate","time":"2020-01-07T01:03:47Z"}`,
		`{"action":"hibernate","time":"2020-01-07T01:03:47.5+02:00","extra":[1,2]}`,
		`{"noticeTime":"2020-01-07T01:03:47Z"}`,
		`{"action":"reboot","time":"x"}`,
		`{"action":null}`, `null`, `[]`, ``, `{} {}`, `<html></html>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []struct {
			path  string
			parse func([]byte) (report.Notice, error)
			kind  report.NoticeKind
			field string
		}{
			{InstanceActionPath, parseInstanceAction, report.Interruption, "time"},
			{RebalancePath, parseRebalance, report.Rebalance, "noticeTime"},
		} {
			n, err := p.parse(body)
			if err != nil {
				if !strings.HasPrefix(err.Error(), p.path+": ") {
					t.Errorf("%s: error %q does not start with the path", p.path, err)
				}
				if n != (report.Notice{}) {
					t.Errorf("%s: notice %+v with error %v", p.path, n, err)
				}
				continue
			}
			if n.Kind != p.kind || (p.kind == report.Interruption) != actions[n.Action] || n.Time.IsZero() {
				t.Fatalf("%s: accepted %q as %+v", p.path, body, n)
			}
			var fields map[string]any
			if err := json.Unmarshal(body, &fields); err != nil {
				t.Fatalf("%s: accepted %q, which is not a JSON object: %v", p.path, body, err)
			}
			s, _ := fields[p.field].(string)
			if when, err := time.Parse(time.RFC3339, s); err != nil || !when.Equal(n.Time) {
				t.Fatalf("%s: accepted %q with deadline %v, want its %s", p.path, body, n.Time, p.field)
			}
			if p.kind == report.Interruption && fields["action"] != n.Action {
				t.Fatalf("%s: accepted %q with action %q", p.path, body, n.Action)
			}
		}
	})
}
