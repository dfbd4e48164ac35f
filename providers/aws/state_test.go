package aws

import (
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/providers"
)

// TestEC2States: an EC2 instance's state maps to the controller's; a
// stopped one is stopped (no GPUs held, its disks alone billed), one
// stopping or shutting down is going.
func TestEC2States(t *testing.T) {
	for _, tt := range []struct {
		name    ec2types.InstanceStateName
		want    providers.InstanceState
		stopped bool
	}{
		{ec2types.InstanceStateNamePending, providers.InstancePending, false},
		{ec2types.InstanceStateNameRunning, providers.InstanceRunning, false},
		{ec2types.InstanceStateNameStopping, providers.InstanceTerminating, false},
		{ec2types.InstanceStateNameShuttingDown, providers.InstanceTerminating, false},
		{ec2types.InstanceStateNameStopped, providers.InstanceTerminating, true},
	} {
		in := instanceOf(ec2types.Instance{State: &ec2types.InstanceState{Name: tt.name}})
		if in.State != tt.want || in.Stopped != tt.stopped {
			t.Errorf("%s: %s, stopped %v; want %s, stopped %v", tt.name, in.State, in.Stopped, tt.want, tt.stopped)
		}
	}
}
