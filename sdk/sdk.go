// Package sdk is what a Fleetcast provider plugin is written with: a
// provider of GPU pools on any cloud or on-prem racks, run by the
// controller as a process of its own and spoken to over gRPC
// (hashicorp/go-plugin; the protocol is providers/plugin/proto).
//
// A plugin implements Provider: Describe says what a pool's group holds
// now, Launch grows it to a target (idempotently for its key: the same key
// again, from a retry or a restarted controller, must not launch twice),
// Terminate removes chosen instances. When the cloud refuses, it returns
// one of the typed errors below, which reach the controller as they are:
// a pool out of capacity or quota backs off, and the planner falls back
// to other pools, as for AWS and GCP. The controller calls it for several
// pools at once (it reads its pools together, and checks identities as
// agents bootstrap), so its methods must be safe for concurrent use. Its
// main is Serve:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"sync"
//		"time"
//
//		"github.com/fleetcast/autoscaler/fleet"
//		"github.com/fleetcast/autoscaler/sdk"
//	)
//
//	// racks powers whole GPU servers on and off; here, in memory.
//	type racks struct {
//		mu   sync.Mutex
//		on   map[string]time.Time // server -> when it was powered on
//		free []string
//		keys map[string]bool // launch keys done
//	}
//
//	func (r *racks) Describe(ctx context.Context, pool fleet.Pool) (sdk.Group, error) {
//		r.mu.Lock()
//		defer r.mu.Unlock()
//		g := sdk.Group{Target: len(r.on)}
//		for id, at := range r.on {
//			g.Instances = append(g.Instances, sdk.Instance{ID: id, State: sdk.InstanceRunning, LaunchedAt: at})
//		}
//		return g, nil
//	}
//
//	func (r *racks) Launch(ctx context.Context, pool fleet.Pool, req sdk.LaunchRequest) error {
//		r.mu.Lock()
//		defer r.mu.Unlock()
//		if r.keys[req.Key] || len(r.on) >= req.Target {
//			return nil // done already
//		}
//		for len(r.on) < req.Target {
//			if len(r.free) == 0 {
//				return &sdk.InsufficientCapacityError{Pool: pool.Name, Err: fmt.Errorf("no powered-off server left")}
//			}
//			r.on[r.free[0]], r.free = time.Now(), r.free[1:]
//		}
//		r.keys[req.Key] = true
//		return nil
//	}
//
//	func (r *racks) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
//		r.mu.Lock()
//		defer r.mu.Unlock()
//		for _, id := range ids {
//			if _, ok := r.on[id]; !ok {
//				return &sdk.NotFoundError{Pool: pool.Name, Resource: "server " + id, Err: fmt.Errorf("not powered on")}
//			}
//			delete(r.on, id)
//			r.free = append(r.free, id)
//		}
//		return nil
//	}
//
//	func main() {
//		sdk.Serve(sdk.Plugin{Name: "racks", Version: "0.1.0",
//			Provider: &racks{on: map[string]time.Time{}, free: []string{"gpu-01", "gpu-02"}, keys: map[string]bool{}}})
//	}
//
// Build it, keep it where only root may write it, and name it in the
// controller's config with its SHA-256 (`sha256sum`), which the controller
// checks before it starts it, with the environment the block gives it
// (not the controller's); its pools name it:
//
//	plugin "racks" {
//	  path   = "/usr/local/libexec/fleetcast/racks"
//	  sha256 = "..."
//	}
//
//	pool "onprem-a100" {
//	  provider = "plugin"
//	  plugin   = "racks"
//	  ...
//	}
//
// A plugin may also implement providers.Protector (SetProtected),
// providers.Reaper (Orphans, TerminateOrphan) and IdentityVerifier (the
// check of what a node presents to bootstrap its credential); Plugin.Configure checks its
// config block and each pool's target settings at start. It never writes
// to stdout (the handshake is there); its logs go to stderr (Logger),
// where the controller takes them up, tagged with its name.
package sdk

import (
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// Provider is what a plugin implements (providers.Provider).
type Provider = providers.Provider

// Plugin is what a plugin serves: its provider, name, version and config
// check.
type Plugin = plugin.Plugin

// Diagnostic is a problem Plugin.Configure found, at a path such as
// "config.endpoint" or "pool.NAME.target.rack".
type Diagnostic = plugin.Diagnostic

// IdentityVerifier checks the identity a node presents when its agent
// bootstraps (agent -identity command): return nil to accept it, a
// RefusedError to refuse it, another error when it cannot say now.
type IdentityVerifier = providers.IdentityVerifier

// The values Describe and Launch deal in.
type (
	Group         = providers.Group
	Instance      = providers.Instance
	InstanceState = providers.InstanceState
	LaunchRequest = providers.LaunchRequest
	Orphan        = providers.Orphan
)

// The instance states.
const (
	InstancePending     = providers.InstancePending
	InstanceRunning     = providers.InstanceRunning
	InstanceTerminating = providers.InstanceTerminating
)

// The typed errors, carried across the wire as they are.
type (
	InsufficientCapacityError = providers.InsufficientCapacityError
	QuotaExceededError        = providers.QuotaExceededError
	ThrottledError            = providers.ThrottledError
	NotFoundError             = providers.NotFoundError
	GroupBusyError            = providers.GroupBusyError
	RefusedError              = providers.RefusedError
)

// ValidAddress reports whether an address is one an Instance may hold:
// an IP address or a host name.
func ValidAddress(addr string) bool { return providers.ValidAddress(addr) }

// ProtocolVersion is the version of the protocol this SDK speaks.
const ProtocolVersion = plugin.ProtocolVersion

// MagicCookieKey is the environment variable of the handshake's cookie,
// which the controller sets for its plugin (go-plugin's own variables are
// PLUGIN_*): a plugin that runs commands of its own need not pass them on.
const MagicCookieKey = "FLEETCAST_PROVIDER_PLUGIN"

// Target is a pool's target block, as JSON values (strings, float64
// numbers, bools, lists as []any, objects as map[string]any): the pool's
// settings for the plugin, which Plugin.Configure checks.
func Target(pool fleet.Pool) map[string]any { return plugin.SettingsOf(pool).Target }

// Logger is a plugin's logger: its lines reach the controller's log at
// their level, tagged with the plugin's name.
func Logger() hclog.Logger { return plugin.Logger() }

// Serve runs p until the controller stops it: a plugin's main.
func Serve(p Plugin) { plugin.Serve(p) }
