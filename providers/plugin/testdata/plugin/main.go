// Command plugin is a provider plugin for the plugin package's tests: an
// in-memory group kept in a state file (so a restarted plugin remembers
// its launches), served through the SDK, whose misbehaviour the tests
// choose with FLEETCAST_TEST_PLUGIN_MODE: capacity (every launch is out of
// capacity), noise (writes to stdout before the handshake), protocol99 (a
// handshake of another protocol version), crash (exits in Describe), hang
// (never answers Describe), crash-once (exits in its first Describe
// only, across restarts), garbage (a group with a negative target),
// child (starts a child that holds its output open and sleeps). Its
// version is "leaked" if the controller's environment reached it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/plugin"
	"github.com/fleetcast/autoscaler/sdk"
)

type state struct {
	Next      int             `json:"next"`
	Instances map[string]bool `json:"instances"` // id -> running
	Keys      map[string]bool `json:"keys"`
	Launches  int             `json:"launches"`
}

type group struct {
	mu   sync.Mutex
	path string
	mode string
}

func (g *group) load() state {
	s := state{Instances: map[string]bool{}, Keys: map[string]bool{}}
	if b, err := os.ReadFile(g.path); err == nil {
		json.Unmarshal(b, &s) //nolint:errcheck // a test's own file
	}
	return s
}

func (g *group) save(s state) {
	b, _ := json.Marshal(s)
	os.WriteFile(g.path, b, 0o600) //nolint:errcheck // a test's own file
}

func (g *group) Describe(ctx context.Context, pool fleet.Pool) (sdk.Group, error) {
	switch g.mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "plugin: crashing in Describe")
		os.Exit(3)
	case "crash-once":
		if marker := g.path + ".crashed"; !exists(marker) {
			os.WriteFile(marker, nil, 0o600) //nolint:errcheck // a test's own file
			fmt.Fprintln(os.Stderr, "plugin: crashing in Describe, once")
			os.Exit(3)
		}
	case "hang":
		<-ctx.Done()
		time.Sleep(time.Hour)
	case "garbage":
		return sdk.Group{Target: -5}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.load()
	out := sdk.Group{Target: len(s.Instances)}
	for id := range s.Instances {
		out.Instances = append(out.Instances, sdk.Instance{ID: id, State: sdk.InstanceRunning, LaunchedAt: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)})
	}
	return out, nil
}

func (g *group) Launch(ctx context.Context, pool fleet.Pool, req sdk.LaunchRequest) error {
	if g.mode == "capacity" {
		return &sdk.InsufficientCapacityError{Pool: pool.Name, Err: fmt.Errorf("no powered-off server left in rack %v", plugin.SettingsOf(pool).Target["rack"])}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.load()
	if s.Keys[req.Key] || len(s.Instances) >= req.Target {
		return nil
	}
	// Named as the launch names them, then by number.
	names := req.Names
	for len(s.Instances) < req.Target {
		if len(names) > 0 {
			s.Instances[names[0]] = true
			names = names[1:]
			continue
		}
		s.Next++
		s.Instances[fmt.Sprintf("rack-%03d", s.Next)] = true
	}
	s.Keys[req.Key] = true
	s.Launches++
	g.save(s)
	return nil
}

func (g *group) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.load()
	for _, id := range ids {
		if !s.Instances[id] {
			return &sdk.NotFoundError{Pool: pool.Name, Resource: "server " + id, Err: errors.New("not powered on")}
		}
		delete(s.Instances, id)
	}
	g.save(s)
	return nil
}

// VerifyIdentity accepts "key-NODE" from a node it has.
func (g *group) VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.load().Instances[node] || document != "key-"+node {
		return &sdk.RefusedError{Pool: pool.Name, Err: fmt.Errorf("%s presented no key of its own", node)}
	}
	return nil
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

type stub struct {
	goplugin.NetRPCUnsupportedPlugin
}

func main() {
	mode := os.Getenv("FLEETCAST_TEST_PLUGIN_MODE")
	version := "0.0.1"
	if os.Getenv("AWS_SECRET_ACCESS_KEY") != "" {
		version = "leaked"
	}
	switch mode {
	case "sleeper":
		time.Sleep(10 * time.Minute)
		return
	case "child":
		self, _ := os.Executable()
		child := exec.Command(self)
		child.Env = []string{"FLEETCAST_TEST_PLUGIN_MODE=sleeper"}
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "noise":
		fmt.Println("starting up, hello")
	case "protocol99":
		hs := plugin.Handshake
		hs.ProtocolVersion = 99
		goplugin.Serve(&goplugin.ServeConfig{HandshakeConfig: hs, Plugins: goplugin.PluginSet{"provider": &stub{}}})
		return
	}
	sdk.Serve(sdk.Plugin{Name: "test-racks", Version: version, Provider: &group{path: os.Getenv("FLEETCAST_TEST_PLUGIN_STATE"), mode: mode},
		Configure: func(ctx context.Context, config map[string]any, pools []fleet.Pool, fleetName string) []sdk.Diagnostic {
			var out []sdk.Diagnostic
			if _, ok := config["endpoint"].(string); !ok {
				out = append(out, sdk.Diagnostic{Path: "config.endpoint", Summary: "Missing endpoint", Detail: "The plugin needs the racks' endpoint."})
			}
			for _, p := range pools {
				if rack, _ := plugin.SettingsOf(p).Target["rack"].(string); rack == "" {
					out = append(out, sdk.Diagnostic{Path: "pool." + p.Name + ".target.rack", Summary: "Missing rack", Detail: "Each pool names its rack."})
				}
			}
			return out
		}})
}
