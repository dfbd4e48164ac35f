package gcp

import (
	"context"
	"strconv"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/fleetcast/autoscaler/internal/gcptest"
	"github.com/fleetcast/autoscaler/providers"
)

// TestInstanceStates: a managed instance's action and status map to the
// controller's states; one stopped or suspended, no action under way, is
// stopped (no GPUs held, its disks alone billed), one stopping is going.
func TestInstanceStates(t *testing.T) {
	for _, tt := range []struct {
		action, status string
		want           providers.InstanceState
		stopped        bool
	}{
		{"NONE", "RUNNING", providers.InstanceRunning, false},
		{"CREATING", "", providers.InstancePending, false},
		{"RECREATING", "RUNNING", providers.InstancePending, false},
		{"DELETING", "RUNNING", providers.InstanceTerminating, false},
		{"NONE", "STOPPING", providers.InstanceTerminating, false},
		{"NONE", "STOPPED", providers.InstanceTerminating, true},
		{"NONE", "TERMINATED", providers.InstanceTerminating, true},
		{"NONE", "SUSPENDED", providers.InstanceTerminating, true},
		{"DELETING", "STOPPED", providers.InstanceTerminating, false},
		{"STARTING", "STOPPED", providers.InstancePending, false},
	} {
		mi := &computepb.ManagedInstance{CurrentAction: proto.String(tt.action), InstanceStatus: proto.String(tt.status)}
		if got, stop := instanceState(mi), stopped(mi); got != tt.want || stop != tt.stopped {
			t.Errorf("%s, %s: %s, stopped %v; want %s, stopped %v", tt.action, tt.status, got, stop, tt.want, tt.stopped)
		}
	}
}

// TestMachineIDs: each listed VM carries its instance's numeric ID; one
// the group recreates keeps its name and gets a new ID, which the
// controller checks a bootstrap against.
func TestMachineIDs(t *testing.T) {
	f := gcptest.NewCompute(t)
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG}, 2)
	p := newTestProvider(t, f, nil)
	pool := migPool("gcp-a100", s)
	grp, err := p.Describe(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(grp.Instances) != 2 || grp.Instances[0].Machine == "" || grp.Instances[0].Machine == grp.Instances[1].Machine {
		t.Fatalf("instances %+v; want two, each with a machine ID of its own", grp.Instances)
	}
	name, was := grp.Instances[0].ID, grp.Instances[0].Machine
	id := f.Recreate(g, name)
	grp, _ = p.Describe(context.Background(), pool)
	for _, in := range grp.Instances {
		if in.ID == name && (in.Machine == was || in.Machine != strconv.FormatUint(id, 10)) {
			t.Errorf("recreated %s: machine %q, was %q; want the new VM's %d", name, in.Machine, was, id)
		}
	}
}
