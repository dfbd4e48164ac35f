package controller

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/slurm"
	"github.com/fleetcast/autoscaler/usage"
)

// TestSlurmOwners: a Slurm read says whose work is waiting (by account,
// and QOS or partition as the slurm block's tier says; held jobs are not
// waiting for capacity) and whose running jobs are on a node, which fills
// in what their agents left out; an account no label can carry is
// unattributed.
func TestSlurmOwners(t *testing.T) {
	submit := t0.Add(-time.Hour)
	jobs := []slurm.Job{
		{ID: "101", Name: "resnet", State: "RUNNING", Account: "vision", QOS: "high", Partition: "train", GPUsPerNode: 8, Nodes: 1,
			Submit: submit, Eligible: submit.Add(10 * time.Minute), Start: t0},
		{ID: "102", State: "PENDING", Reason: "Resources", Account: "nlp", QOS: "normal", Partition: "train", GPUsPerNode: 8, Nodes: 2},
		{ID: "103", State: "PENDING", Reason: "Priority", Account: "nlp", QOS: "normal", Partition: "train", GPUsPerNode: 4, Nodes: 1, Tasks: 3},
		{ID: "104", State: "PENDING", Reason: "JobHeldUser", Account: "nlp", QOS: "normal", Partition: "train", GPUsPerNode: 8, Nodes: 1},
		{ID: "105", State: "PENDING", Reason: "Resources", Account: "speech lab", QOS: "normal", Partition: "debug", GPUsPerNode: 1, Nodes: 1},
	}
	for _, tt := range []struct {
		tier    string
		waiting []usage.Waiting
		running slurmJob
	}{
		{"qos", []usage.Waiting{{Team: "nlp", Tier: "normal", GPUs: 28, Jobs: 4}, {Tier: "normal", GPUs: 1, Jobs: 1}},
			slurmJob{team: "vision", tier: "high", name: "resnet", submit: submit, eligible: submit.Add(10 * time.Minute)}},
		{"partition", []usage.Waiting{{Team: "nlp", Tier: "train", GPUs: 28, Jobs: 4}, {Tier: "debug", GPUs: 1, Jobs: 1}},
			slurmJob{team: "vision", tier: "train", name: "resnet", submit: submit, eligible: submit.Add(10 * time.Minute)}},
	} {
		t.Run(tt.tier, func(t *testing.T) {
			set := fleet.DefaultSlurmSettings()
			set.Tier = tt.tier
			s, err := NewSlurmSource(SlurmOptions{Settings: set, Pending: &Pending{}, Now: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			waiting, running := s.owners(jobs)
			if !reflect.DeepEqual(waiting, tt.waiting) {
				t.Errorf("waiting %+v, want %+v", waiting, tt.waiting)
			}
			if len(running) != len(jobs) || running["101"] != tt.running {
				t.Errorf("owners %+v, want every job's, job 101's %+v", running, tt.running)
			}
			s.waiting, s.jobs, s.readAt = waiting, running, t0
			n := fleet.Node{ID: "dgx-1", Jobs: []fleet.Job{{ID: "101", GPUs: 8, Start: t0}, {ID: "101b", Team: "mine", GPUs: 0}}}
			s.Label(&n)
			j := n.Jobs[0]
			if j.Team != "vision" || j.Tier != tt.running.tier || j.Name != "resnet" || !j.Submitted.Equal(submit) || !j.Eligible.Equal(submit.Add(10*time.Minute)) {
				t.Errorf("job 101 labelled %+v", j)
			}
			if q, ok := j.QueueTime(); !ok || q != 50*time.Minute {
				t.Errorf("queue time %v %v, want 50m from its eligibility", q, ok)
			}
			if n.Jobs[1].Team != "mine" {
				t.Errorf("a job Slurm does not list relabelled: %+v", n.Jobs[1])
			}
			if got := s.Waiting(t0.Add(time.Minute)); !reflect.DeepEqual(got, tt.waiting) {
				t.Errorf("Waiting %+v", got)
			}
			if got := s.Waiting(t0.Add(time.Hour)); got != nil {
				t.Errorf("Waiting an hour after the read %+v, want none (as its demand has expired)", got)
			}
		})
	}
}
