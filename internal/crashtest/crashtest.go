// Package crashtest is a provider for tests that "kills the controller"
// around its next change: before the call reaches the cloud, or after the
// cloud made it but before the controller heard.
package crashtest

import (
	"context"
	"errors"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// ErrCrash stands for the controller dying: the call's outcome is unknown
// to it, as after SIGKILL or a timeout.
var ErrCrash = errors.New("controller killed")

// Provider wraps a provider and returns ErrCrash around its next change:
// Before, without making it; After, once the cloud has made it. Each is
// cleared once used.
type Provider struct {
	providers.Provider
	Before, After bool
}

func (c *Provider) crash(call func() error) error {
	if c.Before {
		c.Before = false
		return ErrCrash
	}
	if err := call(); err != nil {
		return err
	}
	if c.After {
		c.After = false
		return ErrCrash
	}
	return nil
}

// Launch launches through the wrapped provider, crashing as set.
func (c *Provider) Launch(ctx context.Context, p fleet.Pool, req providers.LaunchRequest) error {
	return c.crash(func() error { return c.Provider.Launch(ctx, p, req) })
}

// Terminate terminates through the wrapped provider, crashing as set.
func (c *Provider) Terminate(ctx context.Context, p fleet.Pool, ids []string) error {
	return c.crash(func() error { return c.Provider.Terminate(ctx, p, ids) })
}
