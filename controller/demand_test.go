package controller

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

func demandRig() (*DemandReceiver, *Pending, *time.Time) {
	now := t0
	a100, h100 := simPool("a100-od", 10), simPool("h100-spot", 10)
	a100.GPUModel, h100.GPUModel = "A100", "H100"
	a100.Partitions, h100.Partitions = []string{"train"}, []string{"dev", "train"}
	p := &Pending{}
	return &DemandReceiver{Pools: []fleet.Pool{a100, h100}, Pending: p, Now: func() time.Time { return now }}, p, &now
}

func push(t *testing.T, h http.Handler, token, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/demand", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestDemandPushes(t *testing.T) {
	dr, pending, now := demandRig()
	if w := push(t, dr, "", "application/json", `{"source": "slurm", "pending": [{"pool": "a100-od", "gpus": 16}, {"gpu_model": "h100", "gpus": 8}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	if w := push(t, dr, "", "application/json; charset=utf-8", `{"source": "ray", "pending": [{"pool": "h100-spot", "gpus": 4}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("second source: %d %s", w.Code, w.Body)
	}
	if w := push(t, dr, "", "application/json", `{"source": "kueue", "pending": [{"gpu_model": "H100", "gpus": 2}, {"pool": "a100-od", "gpus": 0}, {"gpus": 5}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("third source: %d %s", w.Code, w.Body)
	}
	if w := push(t, dr, "", "application/json", `{"source": "lsf", "pending": [{"partition": "dev", "gpus": 1}, {"partition": "train", "gpu_model": "h100", "gpus": 2}, {"partition": "dev,train", "gpus": 3}, {"partition": "train", "min_gpus_per_node": 8, "nodes": 2, "gpus": 16}, {"partition": "train", "min_gpus_per_node": 8, "gpus": 4}, {"nodes": 1, "gpus": 8}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("fourth source: %d %s", w.Code, w.Body)
	}
	if w := push(t, dr, "", "application/json", `{"source": "batch", "pending": [{"pool": "h100-spot", "gpus": 3, "tier": "best_effort"}, {"pool": "h100-spot", "gpus": 1, "tier": "best_effort"}, {"gpus": 2, "tier": "best_effort"}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("fifth source: %d %s", w.Code, w.Body)
	}
	// Summed by scope and tier, GPU models without regard to case; a
	// line of no scope is the fleet's, whatever its tier.
	total, scoped := pending.Demand(*now)
	want := []fleet.ScopedDemand{{Nodes: 1, GPUs: 8}, {GPUModel: "H100", GPUs: 10}, {Partition: "dev", GPUs: 1}, {Partition: "dev,train", GPUs: 3},
		{Partition: "train", MinGPUsPerNode: 8, GPUs: 4}, {Partition: "train", MinGPUsPerNode: 8, Nodes: 2, GPUs: 16},
		{Partition: "train", GPUModel: "H100", GPUs: 2}, {Pool: "a100-od", GPUs: 16}, {Pool: "h100-spot", GPUs: 4}, {Pool: "h100-spot", GPUs: 4, Tier: "best_effort"}}
	if total != 75 || !slices.Equal(scoped, want) {
		t.Errorf("pending = %d %v, want 16+8+4+2+5+1+2+3+16+4+8+3+1+2, all but 5 and 2 as %v", total, scoped, want)
	}
	push(t, dr, "", "application/json", `{"source": "kueue", "pending": []}`)
	push(t, dr, "", "application/json", `{"source": "lsf", "pending": []}`)
	push(t, dr, "", "application/json", `{"source": "batch", "pending": []}`)
	// A source's push replaces its previous one; an empty one clears it.
	push(t, dr, "", "application/json", `{"source": "slurm", "pending": []}`)
	if got := pendingGPUs(pending, *now); got != 4 {
		t.Errorf("pending after slurm cleared = %d, want 4", got)
	}
	// A source that stops pushing stops counting after the TTL.
	*now = now.Add(11 * time.Minute)
	if got := pendingGPUs(pending, *now); got != 0 {
		t.Errorf("pending 11 minutes later = %d, want 0", got)
	}
}

// TestDemandModelList: a line for jobs that accept several GPU types
// names them all, '|' between them; any pool of one of them serves it.
func TestDemandModelList(t *testing.T) {
	dr, pending, now := demandRig()
	if w := push(t, dr, "", "application/json", `{"source": "slurm", "pending": [{"gpu_model": "b200|h100", "gpus": 8}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	total, scoped := pending.Demand(*now)
	if want := []fleet.ScopedDemand{{GPUModel: "B200|H100", GPUs: 8}}; total != 8 || !slices.Equal(scoped, want) {
		t.Errorf("pending = %d %v, want 8 %v", total, scoped, want)
	}
}

// TestDemandMIG: a line of MIG instances is summed by profile (without
// regard to case), its instances and GPUs added up; a profile of no
// pool's GPU model, or a line of no instances, is refused (one the GPUs
// have but no pool's layout names is taken: the plan says it is not
// served).
func TestDemandMIG(t *testing.T) {
	dr, pending, now := demandRig()
	dr.Pools[0].GPUModel, dr.Pools[0].MIG = "A100-80GB", []string{"3g.40gb", "3g.40gb"}
	for _, body := range []string{
		`{"source": "a", "pending": [{"mig": "3g.40gb", "instances": 3, "gpus": 2}]}`,
		`{"source": "b", "pending": [{"mig": "3G.40GB", "instances": 1, "gpus": 1}]}`,
	} {
		if w := push(t, dr, "", "application/json", body); w.Code != http.StatusNoContent {
			t.Fatalf("push: %d %s", w.Code, w.Body)
		}
	}
	total, scoped := pending.Demand(*now)
	if want := []fleet.ScopedDemand{{MIG: "3g.40gb", Instances: 4, GPUs: 3}}; total != 3 || !slices.Equal(scoped, want) {
		t.Errorf("pending = %d %v, want 3 %v", total, scoped, want)
	}
	for body, reason := range map[string]string{
		`{"source": "s", "pending": [{"mig": "2g.12gb", "instances": 1, "gpus": 1}]}`:             `pending[0].mig: no pool's GPU model has MIG profile "2g.12gb"`,
		`{"source": "s", "pending": [{"mig": "3g.40gb", "gpus": 1}]}`:                             "pending[0].instances: 0, want 1 to",
		`{"source": "s", "pending": [{"instances": 2, "gpus": 1}]}`:                               "pending[0].instances: 2, but no MIG profile is named (mig)",
		`{"source": "s", "pending": [{"mig": "3g.40gb", "instances": 2, "nodes": 1, "gpus": 8}]}`: "pending[0].nodes: a line for a MIG profile counts instances, not whole nodes",
	} {
		w := push(t, dr, "", "application/json", body)
		if w.Code != 422 || !strings.Contains(w.Body.String(), reason) {
			t.Errorf("%s: %d %s, want 422 %q", body, w.Code, w.Body, reason)
		}
	}
}

// TestDemandRunningEnds: a push's running lines tell when jobs are
// expected to end (a scheduler's time limits). They replace the source's
// earlier ones, a push of them alone leaves its pending demand (and one of
// pending demand alone leaves them), they expire with the push, and they
// set a job's expected end where they name its ID (and its node, when
// they do) and are earlier than its agent's.
func TestDemandRunningEnds(t *testing.T) {
	dr, pending, now := demandRig()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ok := func(body string) {
		t.Helper()
		if w := push(t, dr, "", "application/json", body); w.Code != http.StatusNoContent {
			t.Fatalf("push %s: %d %s", body, w.Code, w.Body)
		}
	}
	ok(`{"source": "slurm", "pending": [{"gpus": 8}]}`)
	ok(`{"source": "slurm", "running": [{"job": "train-7", "expected_end": "2026-11-30T10:30:00Z"}, {"job": "mp-1", "expected_end": "2026-11-30T11:00:00Z"}, {"job": "eval-2", "node": "n2", "expected_end": "2026-11-30T10:20:00Z"}]}`)
	if got := pendingGPUs(pending, *now); got != 8 {
		t.Errorf("a push of running jobs alone changed pending demand to %d, want 8", got)
	}
	node := func(id string, jobs ...fleet.Job) fleet.Node { return fleet.Node{ID: id, Jobs: jobs} }
	tests := []struct {
		name string
		node fleet.Node
		want []time.Time
	}{
		{"no end from the agent", node("n1", fleet.Job{ID: "train-7"}), []time.Time{at(30)}},
		{"the agent's later end", node("n1", fleet.Job{ID: "train-7", ExpectedEnd: at(45)}), []time.Time{at(30)}},
		{"the agent's earlier end", node("n1", fleet.Job{ID: "train-7", ExpectedEnd: at(25)}), []time.Time{at(25)}},
		{"a job not named", node("n1", fleet.Job{ID: "train-8"}), []time.Time{{}}},
		{"every node of a multi-node job", node("n3", fleet.Job{ID: "mp-1"}, fleet.Job{ID: "train-7"}), []time.Time{at(60), at(30)}},
		{"the node named", node("n2", fleet.Job{ID: "eval-2"}), []time.Time{at(20)}},
		{"another node", node("n1", fleet.Job{ID: "eval-2"}), []time.Time{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node
			n.Jobs = slices.Clone(n.Jobs)
			pending.Ends(*now).Apply(&n)
			for i, j := range n.Jobs {
				if !j.ExpectedEnd.Equal(tt.want[i]) {
					t.Errorf("job %s expected to end %v, want %v", j.ID, j.ExpectedEnd, tt.want[i])
				}
			}
		})
	}
	// A push of pending demand alone leaves them; one of running lines
	// replaces them.
	ok(`{"source": "slurm", "pending": []}`)
	if got := pending.Ends(*now); len(got["train-7"]) != 1 {
		t.Errorf("ends after a pending push: %v", got)
	}
	ok(`{"source": "slurm", "running": [{"job": "train-9", "expected_end": "2026-11-30T10:40:00Z"}]}`)
	if got := pending.Ends(*now); len(got) != 1 || len(got["train-9"]) != 1 {
		t.Errorf("ends after a new push of running jobs: %v, want train-9's only", got)
	}
	// A later push of the same job's end moves it earlier only: a
	// scheduler cannot hold a node by pushing ever later ends.
	ok(`{"source": "slurm", "running": [{"job": "train-9", "expected_end": "2026-11-30T11:40:00Z"}]}`)
	if got := pending.Ends(*now)["train-9"]; len(got) != 1 || !got[0].at.Equal(at(40)) {
		t.Errorf("a later end pushed again: %v, want 10:40 kept", got)
	}
	ok(`{"source": "slurm", "running": [{"job": "train-9", "expected_end": "2026-11-30T10:38:00Z"}]}`)
	if got := pending.Ends(*now)["train-9"]; len(got) != 1 || !got[0].at.Equal(at(38)) {
		t.Errorf("an earlier end pushed: %v, want 10:38", got)
	}
	// null leaves them, [] clears them, and a refused push changes
	// neither them nor pending demand.
	ok(`{"source": "slurm", "pending": [{"gpus": 8}], "running": null}`)
	if got := pending.Ends(*now); len(got["train-9"]) != 1 {
		t.Errorf(`ends after "running": null: %v`, got)
	}
	if w := push(t, dr, "", "application/json", `{"source": "slurm", "pending": [{"gpus": 16}], "running": [{"job": "x"}]}`); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("a running line without its end: %d %s", w.Code, w.Body)
	}
	if got := pendingGPUs(pending, *now); got != 8 || len(pending.Ends(*now)["train-9"]) != 1 {
		t.Errorf("a refused push changed pending demand to %d or the ends to %v", got, pending.Ends(*now))
	}
	ok(`{"source": "slurm", "running": []}`)
	if got := pending.Ends(*now); len(got) != 0 {
		t.Errorf(`ends after "running": []: %v`, got)
	}
	ok(`{"source": "slurm", "running": [{"job": "train-9", "expected_end": "2026-11-30T10:40:00Z"}]}`)
	// Two sources' ends of one job: the earlier counts.
	ok(`{"source": "ray", "running": [{"job": "train-9", "expected_end": "2026-11-30T10:35:00Z"}]}`)
	n := node("n1", fleet.Job{ID: "train-9"})
	pending.Ends(*now).Apply(&n)
	if !n.Jobs[0].ExpectedEnd.Equal(at(35)) {
		t.Errorf("two sources' ends: %v, want the earlier, 10:35", n.Jobs[0].ExpectedEnd)
	}
	// They expire with the push.
	*now = now.Add(11 * time.Minute)
	if got := pending.Ends(*now); len(got) != 0 {
		t.Errorf("ends 11 minutes after the pushes: %v", got)
	}
}

func TestDemandRefusals(t *testing.T) {
	good := `{"source": "slurm", "pending": [{"pool": "a100-od", "gpus": 16}]}`
	tests := []struct {
		name, token, contentType, body string
		status                         int
		reason                         string
	}{
		{"not JSON", "", "text/plain", good, 415, "application/json"},
		{"malformed", "", "application/json", `{"source": "slurm", "pending": [`, 400, "demand:"},
		{"unknown field", "", "application/json", `{"source": "slurm", "pendng": []}`, 400, "pendng"},
		{"trailing data", "", "application/json", good + good, 400, "after the JSON object"},
		{"huge", "", "application/json", `{"source": "` + strings.Repeat("x", 1100<<10) + `"}`, 413, "larger than"},
		{"running without a job", "", "application/json", `{"source": "s", "running": [{"expected_end": "2026-12-01T09:00:00Z"}]}`, 422, "running[0].job: want the job's id"},
		{"running without an end", "", "application/json", `{"source": "s", "running": [{"job": "train-7"}]}`, 422, "running[0].expected_end: required"},
		{"running a year and more", "", "application/json", `{"source": "s", "running": [{"job": "train-7", "expected_end": "2030-01-01T00:00:00Z"}]}`, 422, "is more than 365d ahead"},
		{"running job id too long", "", "application/json", `{"source": "s", "running": [{"job": "` + strings.Repeat("j", 257) + `", "expected_end": "2026-12-01T09:00:00Z"}]}`, 422, "running[0].job: want the job's id, 1 to 256 characters"},
		{"running twice", "", "application/json", `{"source": "s", "running": [{"job": "a", "node": "n1", "expected_end": "2026-12-01T09:00:00Z"}, {"job": "a", "node": "n1", "expected_end": "2026-12-01T10:00:00Z"}]}`, 422, `running[1]: job "a" (node "n1") listed twice`},
		{"running end not a time", "", "application/json", `{"source": "s", "running": [{"job": "a", "expected_end": "6h"}]}`, 400, `line 1, column 65: parsing time "6h"`},
		{"no source", "", "application/json", `{"pending": []}`, 422, "source"},
		{"unknown pool", "", "application/json", `{"source": "s", "pending": [{"pool": "v100", "gpus": 1}]}`, 422, `pending[0].pool: unknown pool "v100"`},
		{"unknown model", "", "application/json", `{"source": "s", "pending": [{"gpu_model": "B200", "gpus": 1}]}`, 422, `no pool has GPU model "B200"`},
		{"unknown models", "", "application/json", `{"source": "s", "pending": [{"gpu_model": "B200|V100", "gpus": 1}]}`, 422, `no pool has GPU model "B200|V100"`},
		{"pool and model", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "gpu_model": "A100", "gpus": 1}]}`, 422, "a pool is a scope of its own"},
		{"pool and partition", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "partition": "train", "gpus": 1}]}`, 422, "a pool is a scope of its own"},
		{"the controller's own source", "", "application/json", `{"source": "fleetcast:slurm", "pending": [{"gpus": 1}]}`, 422, `source: "fleetcast:slurm": names beginning "fleetcast:" are the controller's own`},
		{"pool and width", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "min_gpus_per_node": 8, "gpus": 1}]}`, 422, "a pool is a scope of its own"},
		{"pool and Slurm node", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "slurm_node": "dgx-1", "gpus": 8}]}`, 422, "a pool is a scope of its own: want pool alone, or any of gpu_model, partition, slurm_node and min_gpus_per_node"},
		{"unknown Slurm node", "", "application/json", `{"source": "s", "pending": [{"slurm_node": "dgx-1", "gpus": 8}]}`, 422, `pending[0].slurm_node: no pool has Slurm node "dgx-1"`},
		{"more nodes than GPUs", "", "application/json", `{"source": "s", "pending": [{"nodes": 4, "gpus": 2}]}`, 422, "pending[0].nodes: 4, want 0 to its gpus (2)"},
		{"width absurd", "", "application/json", `{"source": "s", "pending": [{"min_gpus_per_node": 5000, "gpus": 1}]}`, 422, "pending[0].min_gpus_per_node: 5000, want 0 to 1024"},
		{"nodes too wide", "", "application/json", `{"source": "s", "pending": [{"partition": "train", "min_gpus_per_node": 16, "gpus": 1}]}`, 422, "pending[0]: no pool serves partition train, nodes of 16+ GPUs"},
		{"unknown partition", "", "application/json", `{"source": "s", "pending": [{"partition": "debug", "gpus": 1}]}`, 422, `pending[0].partition: no pool serves partition "debug"`},
		{"a partition without the model", "", "application/json", `{"source": "s", "pending": [{"partition": "dev", "gpu_model": "A100", "gpus": 1}]}`, 422, `pending[0]: no pool of partition "dev" has GPU model "A100"`},
		{"negative", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "gpus": -1}]}`, 422, "pending[0].gpus: -1"},
		{"absurd", "", "application/json", `{"source": "s", "pending": [{"pool": "a100-od", "gpus": 5000000}]}`, 422, "want 0 to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dr, pending, now := demandRig()
			w := push(t, dr, tt.token, tt.contentType, tt.body)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.reason) {
				t.Errorf("got %d %q, want %d with %q", w.Code, w.Body, tt.status, tt.reason)
			}
			if got := pendingGPUs(pending, *now); got != 0 {
				t.Errorf("refused push changed pending demand to %d", got)
			}
		})
	}
}

func FuzzDemandReceiver(f *testing.F) {
	f.Add(`{"source": "slurm", "pending": [{"pool": "a100-od", "gpus": 16}, {"gpu_model": "H100", "gpus": 8}]}`)
	f.Add(`{"source": "s", "pending": [{"pool": "v100", "gpus": 1}]}`)
	f.Add(`{"source": "", "pending": null}`)
	f.Add(`[]`)
	f.Add(`{"source": "s", "running": [{"job": "train-7", "node": "i-1", "expected_end": "2026-11-30T10:30:00Z"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		dr, pending, now := demandRig()
		w := push(t, dr, "", "application/json", body)
		got := pendingGPUs(pending, *now)
		switch {
		case w.Code == http.StatusNoContent:
			var d DemandPush
			if err := fleet.DecodeJSON([]byte(body), &d); err != nil {
				t.Fatalf("accepted a push that does not decode: %v", err)
			}
			want := 0
			for _, l := range d.Pending {
				want += l.GPUs
			}
			if got != want {
				t.Fatalf("accepted push gives %d pending GPUs, want %d", got, want)
			}
		case w.Code >= 400 && w.Code < 500:
			if got != 0 || len(pending.Ends(*now)) != 0 {
				t.Fatalf("refused push (%d) changed pending demand to %d, or the running jobs' ends to %v", w.Code, got, pending.Ends(*now))
			}
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}

// pendingGPUs is the pending GPUs of every fresh push.
func pendingGPUs(p *Pending, now time.Time) int {
	total, _ := p.Demand(now)
	return total
}

// TestDemandAnnouncements: demand announced ahead is kept by source and
// id until its start passes, updated or cancelled by id, beside the
// pending demand; bad announcements are refused with the field.
func TestDemandAnnouncements(t *testing.T) {
	dr, pending, now := demandRig()
	base := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC) // the times in the pushes are from 14:00
	*now = base
	ok := func(body string) {
		t.Helper()
		if w := push(t, dr, "", "application/json", body); w.Code != http.StatusNoContent {
			t.Fatalf("push %s: %d %s", body, w.Code, w.Body)
		}
	}
	ok(`{"source": "slurm", "pending": [{"gpus": 4}], "announce": [{"id": "train", "start_at": "2026-11-30T15:00:00Z", "gpus": 64, "duration": "6h"},
		{"id": "eval", "start_at": "2026-11-30T14:30:00Z", "gpus": 8}]}`)
	ok(`{"source": "airflow", "announce": [{"id": "train", "start_at": "2026-11-30T14:20:00Z", "gpus": 16, "duration": "1h"}]}`)
	want := []fleet.Announcement{
		{ID: "airflow/train", StartAt: base.Add(20 * time.Minute), GPUs: 16, Duration: time.Hour},
		{ID: "slurm/eval", StartAt: base.Add(30 * time.Minute), GPUs: 8},
		{ID: "slurm/train", StartAt: base.Add(time.Hour), GPUs: 64, Duration: 6 * time.Hour},
	}
	announced := func() []fleet.Announcement {
		ahead, _ := pending.Announced(*now)
		return ahead
	}
	if got := announced(); !slices.Equal(got, want) {
		t.Errorf("announced %v, want %v", got, want)
	}
	// Announcements alone leave the source's pending demand.
	ok(`{"source": "slurm", "announce": [{"id": "eval", "cancel": true}, {"id": "train", "start_at": "2026-11-30T16:00:00Z", "gpus": 32}]}`)
	if got := pendingGPUs(pending, *now); got != 4 {
		t.Errorf("pending %d after a push of announcements, want 4", got)
	}
	want = []fleet.Announcement{want[0], {ID: "slurm/train", StartAt: base.Add(2 * time.Hour), GPUs: 32}}
	if got := announced(); !slices.Equal(got, want) {
		t.Errorf("after an update and a cancel: %v, want %v", got, want)
	}
	// Ahead no more once the start passes (its jobs are pushed as
	// pending), but under way for its duration.
	*now = base.Add(20 * time.Minute)
	if ahead, under := pending.Announced(*now); !slices.Equal(ahead, want[1:]) || !slices.Equal(under, want[:1]) {
		t.Errorf("at 14:20: ahead %v, under way %v; want %v and %v", ahead, under, want[1:], want[:1])
	}
	// A push's pending lines do not expire its announcements; the hour
	// of airflow/train does.
	*now = base.Add(90 * time.Minute)
	if ahead, under := pending.Announced(*now); len(ahead) != 1 || len(under) != 0 {
		t.Errorf("at 15:30: ahead %v, under way %v; want slurm/train ahead, none under way", ahead, under)
	}
	// One without a duration is forgotten at its start.
	*now = base.Add(2 * time.Hour)
	if ahead, under := pending.Announced(*now); len(ahead)+len(under) != 0 {
		t.Errorf("at 16:00: ahead %v, under way %v; want none", ahead, under)
	}

	long := `{"source": "s", "announce": [` + strings.Repeat(`{"id": "x", "cancel": true},`, maxAnnouncements) + `{"id": "y", "cancel": true}]}`
	for _, tt := range []struct{ name, body, reason string }{
		{"no id", `{"source": "s", "announce": [{"start_at": "2026-11-30T15:00:00Z", "gpus": 1}]}`, "announce[0].id"},
		{"twice", `{"source": "s", "announce": [{"id": "a", "cancel": true}, {"id": "a", "cancel": true}]}`, `announce[1].id: "a" announced twice`},
		{"no start", `{"source": "s", "announce": [{"id": "a", "gpus": 1}]}`, "announce[0].start_at: required"},
		{"far ahead", `{"source": "s", "announce": [{"id": "a", "start_at": "2027-06-01T00:00:00Z", "gpus": 1}]}`, "announce[0].start_at: 2027-06-01T00:00:00Z is more than"},
		{"bad duration", `{"source": "s", "announce": [{"id": "a", "start_at": "2026-11-30T15:00:00Z", "gpus": 1, "duration": "soon"}]}`, "announce[0].duration"},
		{"negative duration", `{"source": "s", "announce": [{"id": "a", "start_at": "2026-11-30T15:00:00Z", "gpus": 1, "duration": "-1h"}]}`, "announce[0].duration"},
		{"too many GPUs", `{"source": "s", "announce": [{"id": "a", "start_at": "2026-11-30T15:00:00Z", "gpus": 1000001}]}`, "announce[0].gpus"},
		{"a cancel with more", `{"source": "s", "announce": [{"id": "a", "cancel": true, "gpus": 4}]}`, "announce[0]: a cancellation has only id and cancel"},
		{"bad time", `{"source": "s", "announce": [{"id": "a", "start_at": "tomorrow"}]}`, "demand:"},
		{"too many", long, "announce: 1001 announcements"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := announced()
			w := push(t, dr, "", "application/json", tt.body)
			if w.Code/100 != 4 || !strings.Contains(w.Body.String(), tt.reason) {
				t.Errorf("%d %q, want a 4xx with %q", w.Code, w.Body, tt.reason)
			}
			if got := announced(); !slices.Equal(got, before) {
				t.Errorf("a refused push changed the announcements: %v", got)
			}
		})
	}
}
