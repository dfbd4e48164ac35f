package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/checksum"
	"github.com/fleetcast/autoscaler/providers"
	pb "github.com/fleetcast/autoscaler/providers/plugin/proto"
)

// Spec says how to start a plugin: its executable, checked against its
// SHA-256 before it runs, its arguments, and its config block.
type Spec struct {
	// Name is the plugin's name in the config; its logs are tagged with it.
	Name string
	// Path is the executable; SHA256 its hex SHA-256, which it must have.
	Path, SHA256 string
	Args         []string
	// Config is the plugin's config block, as JSON values.
	Config map[string]any
	// Env is the plugin's environment (KEY=VALUE): it gets this and no
	// more, not the controller's (its cloud credentials among them).
	Env []string
	// CallTimeout bounds every call; CallTimeout when 0.
	CallTimeout time.Duration
}

// Timeouts bound a plugin: its start and handshake, every call (by
// default), and its shutdown before its processes are killed.
const (
	StartTimeout = 10 * time.Second
	CallTimeout  = 30 * time.Second
	StopTimeout  = 5 * time.Second
)

// maxMessage bounds a plugin's answer on the wire.
const maxMessage = 16 << 20

// Client drives the pools of one plugin process, as a providers.Provider:
// each call has a deadline, and the plugin's typed errors come back as
// the shared typed errors. It is safe for concurrent use.
type Client struct {
	spec Spec
	log  hclog.Logger

	client *goplugin.Client
	cmd    *exec.Cmd
	rpc    pb.ProviderClient
	info   *pb.InfoResponse
	stop   sync.Once
}

// Start starts the plugin, checked against its SHA-256, and shakes hands
// with it (the protocol version, gRPC over mTLS) within StartTimeout and
// ctx's deadline; it is not configured yet (Configure). A plugin that does not start, or answers the handshake
// wrongly, is an error naming it, and its process is gone: one with
// another checksum a *checksum.Error, with the checksum found; a
// missing one an error that errors.Is fs.ErrNotExist.
func Start(ctx context.Context, spec Spec, log hclog.Logger) (*Client, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sum, err := hex.DecodeString(spec.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("plugin %s: sha256 %q: want 64 hex digits", spec.Name, spec.SHA256)
	}
	// Checked here first for an error that says the checksum found (a
	// *checksum.Error), and by go-plugin again as it starts it.
	if err := checksum.VerifySHA256(spec.Path, spec.SHA256); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", spec.Name, err)
	}
	// The handshake within StartTimeout, and within ctx's deadline.
	startTimeout := StartTimeout
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", spec.Name, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		startTimeout = min(startTimeout, max(time.Until(dl), time.Millisecond))
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	// Its own process group, killed whole (its children too), and killed
	// with the controller if it dies first.
	cmd.SysProcAttr = procAttr()
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          goplugin.PluginSet{pluginName: &grpcPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		SecureConfig:     &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     startTimeout,
		GRPCDialOptions:  []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage))},
		Logger:           log.Named(spec.Name),
		Managed:          false,
	})
	if spec.CallTimeout <= 0 {
		spec.CallTimeout = CallTimeout
	}
	cl := &Client{spec: spec, log: log.Named(spec.Name), client: c, cmd: cmd}
	rpcClient, err := c.Client()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("plugin %s (%s): %w", spec.Name, spec.Path, err)
	}
	raw, err := rpcClient.Dispense(pluginName)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("plugin %s: %w", spec.Name, err)
	}
	cl.rpc = raw.(pb.ProviderClient)
	ictx, cancel := context.WithTimeout(ctx, spec.CallTimeout)
	defer cancel()
	info, err := cl.rpc.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("plugin %s: info: %w", spec.Name, err)
	}
	info.Name, info.Version = cut(info.GetName()), cut(info.GetVersion())
	cl.info = info
	return cl, nil
}

// Info is what the plugin said of itself at its start.
func (c *Client) Info() (name, version string, protector, reaper bool) {
	return c.info.GetName(), c.info.GetVersion(), c.info.GetProtector(), c.info.GetReaper()
}

// MaxIdentity bounds the identity document a node presents.
const MaxIdentity = 16 << 10

// VerifyIdentity asks the plugin whether document proves the caller is
// node, of pool; an error (a RefusedError where the plugin has no such
// check, or the document is too large) if not.
func (c *Client) VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error {
	if !c.info.GetIdentity() {
		return &providers.RefusedError{Pool: pool.Name, Err: fmt.Errorf("plugin %s checks no node identities", c.spec.Name)}
	}
	if len(document) > MaxIdentity {
		return &providers.RefusedError{Pool: pool.Name, Err: fmt.Errorf("an identity document of %d bytes, more than %d", len(document), MaxIdentity)}
	}
	return c.call(ctx, pool, "verify-identity", func(ctx context.Context, w *pb.Pool) error {
		_, err := c.rpc.VerifyIdentity(ctx, &pb.VerifyIdentityRequest{Pool: w, Node: node, Document: document})
		return err
	})
}

// Protocol is the protocol version the plugin and the controller agreed
// on in the handshake.
func (c *Client) Protocol() int { return c.client.NegotiatedVersion() }

// Close stops the plugin: it is asked to shut down, and after StopTimeout
// its process group (its children too) is killed. It returns once they
// are gone, or at once if they are.
func (c *Client) Close() {
	c.stop.Do(func() {
		done := make(chan struct{})
		go func() { c.client.Kill(); close(done) }()
		select {
		case <-done:
		case <-time.After(StopTimeout):
			c.log.Warn("plugin did not stop; killing its processes")
		}
		killGroup(c.cmd)
		select {
		case <-done:
		case <-time.After(StopTimeout):
			c.log.Error("plugin's processes did not go away after they were killed")
		}
	})
}

// Exited reports whether the plugin's process has exited (it crashed, or
// was closed).
func (c *Client) Exited() bool { return c.client.Exited() }

// Configure sends the plugin its config and its pools, and returns what
// it found wrong with them.
func (c *Client) Configure(ctx context.Context, pools []fleet.Pool, fleetName string) ([]Diagnostic, error) {
	cfg, err := configToWire(c.spec.Config)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", c.spec.Name, err)
	}
	req := &pb.ConfigureRequest{Config: cfg, Fleet: fleetName}
	for _, p := range pools {
		w, err := poolToWire(p)
		if err != nil {
			return nil, err
		}
		req.Pools = append(req.Pools, w)
	}
	ctx, cancel := context.WithTimeout(ctx, c.spec.CallTimeout)
	defer cancel()
	resp, err := c.rpc.Configure(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: configure: %w", c.spec.Name, err)
	}
	var out []Diagnostic
	for i, d := range resp.GetDiagnostics() {
		if i == maxDiagnostics {
			out = append(out, Diagnostic{Summary: fmt.Sprintf("... and %d more", len(resp.GetDiagnostics())-i)})
			break
		}
		out = append(out, Diagnostic{Path: cut(d.GetPath()), Summary: cut(d.GetSummary()), Detail: cut(d.GetDetail())})
	}
	return out, nil
}

// maxDiagnostics bounds what Configure reports.
const maxDiagnostics = 100

// cut is a plugin's text, at most maxText bytes of valid UTF-8.
func cut(s string) string {
	if len(s) > maxText {
		s = s[:maxText] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// call runs one call with the plugin's deadline, its error typed.
func (c *Client) call(ctx context.Context, pool fleet.Pool, name string, f func(context.Context, *pb.Pool) error) error {
	w, err := poolToWire(pool)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.spec.CallTimeout)
	defer cancel()
	err = f(ctx, w)
	if st, ok := status.FromError(err); ok && st.Code() == codes.DeadlineExceeded {
		return fmt.Errorf("pool %s: plugin %s: %s did not answer within %s: %w", pool.Name, c.spec.Name, name, c.spec.CallTimeout, err)
	}
	return errorFromStatus(pool.Name, c.spec.Name+" "+name, err)
}

// Describe asks the plugin for the pool's group, and checks its answer.
func (c *Client) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	var g providers.Group
	err := c.call(ctx, pool, "describe", func(ctx context.Context, w *pb.Pool) error {
		resp, err := c.rpc.Describe(ctx, &pb.DescribeRequest{Pool: w})
		if err != nil {
			return err
		}
		g, err = groupFromWire(pool.Name, resp.GetGroup())
		return err
	})
	return g, err
}

// Launch asks the plugin to grow the pool's group, with the request's key.
func (c *Client) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	return c.call(ctx, pool, "launch", func(ctx context.Context, w *pb.Pool) error {
		_, err := c.rpc.Launch(ctx, &pb.LaunchRequest{Pool: w, Count: int32(req.Count), Target: int32(req.Target), Key: req.Key, Fleet: req.Fleet, Names: req.Names})
		return err
	})
}

// Terminate asks the plugin to remove the named instances.
func (c *Client) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	return c.call(ctx, pool, "terminate", func(ctx context.Context, w *pb.Pool) error {
		_, err := c.rpc.Terminate(ctx, &pb.TerminateRequest{Pool: w, InstanceIds: ids})
		return err
	})
}

// SetProtected asks the plugin to protect instances from its cloud's own
// scale-in, if it can (Info).
func (c *Client) SetProtected(ctx context.Context, pool fleet.Pool, ids []string, protected bool) error {
	if !c.info.GetProtector() {
		return nil // nothing scales the group in but Fleetcast
	}
	return c.call(ctx, pool, "set-protected", func(ctx context.Context, w *pb.Pool) error {
		_, err := c.rpc.SetProtected(ctx, &pb.SetProtectedRequest{Pool: w, InstanceIds: ids, Protected: protected})
		return err
	})
}

// Orphans asks the plugin for the fleet's instances whose pool is not
// among pools; none if it cannot list them (Info).
func (c *Client) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	if !c.info.GetReaper() || len(pools) == 0 {
		return nil, nil
	}
	req := &pb.OrphansRequest{Fleet: fleetName}
	byName := map[string]fleet.Pool{}
	for _, p := range pools {
		w, err := poolToWire(p)
		if err != nil {
			return nil, err
		}
		req.Pools, byName[p.Name] = append(req.Pools, w), p
	}
	var out []providers.Orphan
	err := c.call(ctx, pools[0], "orphans", func(ctx context.Context, _ *pb.Pool) error {
		resp, err := c.rpc.Orphans(ctx, req)
		if err != nil {
			return err
		}
		for _, o := range resp.GetOrphans() {
			via, ok := byName[o.GetVia()]
			if !ok {
				return fmt.Errorf("the plugin names orphan %q's pool %q, which it was not given", o.GetInstance().GetId(), o.GetVia())
			}
			g, err := groupFromWire(via.Name, &pb.Group{Target: 1, Instances: []*pb.Instance{o.GetInstance()}})
			if err != nil {
				return err
			}
			out = append(out, providers.Orphan{Instance: g.Instances[0], Pool: cut(o.GetPool()), Via: via})
		}
		return nil
	})
	return out, err
}

// TerminateOrphan asks the plugin to terminate an orphan it listed.
func (c *Client) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	return c.call(ctx, o.Via, "terminate-orphan", func(ctx context.Context, via *pb.Pool) error {
		in := groupToWire(providers.Group{Instances: []providers.Instance{o.Instance}}).GetInstances()[0]
		_, err := c.rpc.TerminateOrphan(ctx, &pb.TerminateOrphanRequest{Fleet: fleetName, Orphan: &pb.Orphan{Instance: in, Pool: o.Pool, Via: o.Via.Name}, Via: via})
		return err
	})
}

// String names the plugin.
func (c *Client) String() string {
	return fmt.Sprintf("plugin %s (%s)", c.spec.Name, strings.TrimSpace(c.info.GetName()+" "+c.info.GetVersion()))
}
