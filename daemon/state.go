package daemon

import (
	"context"

	"github.com/fleetcast/autoscaler/election"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// OpenState opens the controller's state as ctl says: the bbolt file in
// ctl.StateDir, or, with ctl.HA, the fleet's prefix in etcd, its writes
// fenced by fence (nil: not fenced, for commands run with no controller
// running), and, with existing, refused where there is no state yet
// rather than made. close closes the store and its client.
func OpenState(ctx context.Context, ctl fleet.ControllerSettings, fence state.Fence, existing bool) (s *state.Store, close func(), err error) {
	if ctl.HA == nil {
		if s, err = state.Open(ctl.StateDir); err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	c, err := election.Dial(*ctl.HA)
	if err != nil {
		return nil, nil, err
	}
	if s, err = state.OpenEtcd(ctx, state.EtcdOptions{Client: c, Prefix: ctl.HAPrefix() + "state/", Fence: fence, Existing: existing}); err != nil {
		c.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); c.Close() }, nil
}
