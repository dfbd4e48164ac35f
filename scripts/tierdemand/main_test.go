package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/simulate"
)

// TestTierDemand: each tier's column holds the GPUs its jobs hold at each
// step, computed here by hand; a job without a tier takes the label
// simulate draws for it; a tier -tiers does not name is refused.
func TestTierDemand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.csv")
	// A 2-GPU critical job for the first 20 minutes; a 4-GPU best-effort
	// one from minute 5 to 15 (half of each of the first two steps); an
	// unlabelled 1-GPU job for the third step.
	csv := "job_id,submit_s,gpus,duration_s,tier\na,0,2,1200,critical\nb,300,4,600,best_effort\nc,1200,1,600,\n"
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	label := "critical=0.5,best_effort=0.5"
	if err := run([]string{"-trace", path, "-tiers", "critical,best_effort", "-label-tiers", label, "-seed", "7"}, &out); err != nil {
		t.Fatal(err)
	}
	shares, _ := simulate.ParseLabelTiers(label)
	c := map[string]string{"critical": "1.000,0.000", "best_effort": "0.000,1.000"}[simulate.LabelTier(shares, 7, "c")]
	want := "t_start_s,critical,best_effort\n0,2.000,2.000\n600,2.000,2.000\n1200," + c + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-trace", path, "-tiers", "critical,best_effort"}, `job c has tier "", which -tiers does not name`},
		{[]string{"-trace", path, "-tiers", "critical"}, `job b has tier "best_effort", which -tiers does not name`},
		{[]string{"-trace", path, "-tiers", "critical,best_effort", "-label-tiers", "gold=1"}, `-label-tiers names "gold"`},
		{[]string{"-trace", path}, "want -trace FILE -tiers a,b,c"},
		{[]string{"-trace", path, "-tiers", "critical,"}, `-tiers "critical,": want distinct tier names`},
		{[]string{"-trace", path, "-tiers", "critical,best_effort,critical"}, "want distinct tier names"},
		{[]string{"-trace", path, "-tiers", "critical,best_effort", "-step", "0s"}, "-step 0s: want above 0"},
	} {
		if err := run(tt.args, &out); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}
