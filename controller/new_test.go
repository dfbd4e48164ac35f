package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// TestNewRefuses: a controller made without an interval, a fleet name or
// an agent timeout is an error naming what is missing, not a controller
// whose ticker panics or whose every node is silent.
func TestNewRefuses(t *testing.T) {
	now := func() time.Time { return t0 }
	for _, tt := range []struct {
		name   string
		change func(*fleet.Settings, *fleet.ControllerSettings)
		want   string
	}{
		{"no interval", func(_ *fleet.Settings, c *fleet.ControllerSettings) { c.Interval = 0 }, "interval 0s"},
		{"no fleet", func(_ *fleet.Settings, c *fleet.ControllerSettings) { c.Fleet = "" }, "no fleet name"},
		{"no agent timeout", func(s *fleet.Settings, _ *fleet.ControllerSettings) { s.AgentTimeout = 0 }, "agent timeout 0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set, ctl := fleet.DefaultSettings(), fleet.DefaultControllerSettings()
			tt.change(&set, &ctl)
			_, err := New(Options{Settings: &set, Controller: ctl, Store: &state.Memory{}, Agents: NewAgents(now), Pending: &Pending{}, Now: now})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v; want an error saying %q", err, tt.want)
			}
		})
	}
}
