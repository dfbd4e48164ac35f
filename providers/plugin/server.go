package plugin

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	pb "github.com/fleetcast/autoscaler/providers/plugin/proto"
)

// ProtocolVersion is the plugin protocol's version (providers/plugin/proto:
// its compatibility policy), in go-plugin's handshake.
const ProtocolVersion = 1

// Handshake is what a plugin and the controller check of each other
// before anything else: the protocol version, and a cookie that tells a
// plugin it was started by Fleetcast (run by hand, it says so and exits).
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "FLEETCAST_PROVIDER_PLUGIN", // sdk.MagicCookieKey
	MagicCookieValue: "b6f3c1de-9c8e-4d1e-9a53-2f0e6d5c7a41",
}

// pluginName is the one plugin a provider plugin process serves.
const pluginName = "provider"

// Diagnostic is a problem a plugin found in its config or a pool's target
// settings: Path names the attribute ("config.endpoint",
// "pool.NAME.target.rack"), and the controller points at it in the file.
type Diagnostic struct {
	Path, Summary, Detail string
}

// Plugin is what a provider plugin serves: its provider, its name and
// version, and the check of its config.
type Plugin struct {
	// Name and Version are the plugin's own, for `autoscaler plugins`.
	Name, Version string
	// Provider drives the plugin's pools. If it also implements
	// providers.Protector, providers.Reaper or providers.IdentityVerifier,
	// those calls are served.
	Provider providers.Provider
	// Configure checks the plugin's config (its config block, as JSON
	// values) and its pools' target settings, and keeps what it needs;
	// nil accepts any.
	Configure func(ctx context.Context, config map[string]any, pools []fleet.Pool, fleetName string) []Diagnostic
}

// grpcPlugin is go-plugin's view of the protocol: the server side serves
// impl, the client side dispenses a pb.ProviderClient.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl *server
}

func (g *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, g.impl)
	return nil
}

func (g *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewProviderClient(c), nil
}

// Logger is a plugin's logger: JSON lines on stderr, which the controller
// reads and logs again at their level, tagged with the plugin's name (a
// plain line on stderr is logged at debug level).
func Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: os.Stderr, JSONFormat: true})
}

// Serve runs p as a provider plugin until the controller stops it: the
// handshake on stdout, then gRPC (over mTLS when the controller asks,
// which it does). It is a plugin's main.
func Serve(p Plugin) {
	serve(p, Handshake)
}

func serve(p Plugin, hs goplugin.HandshakeConfig) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: hs,
		Plugins:         goplugin.PluginSet{pluginName: &grpcPlugin{impl: &server{p: p}}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
}

// server answers the protocol's calls with a Plugin.
type server struct {
	pb.UnimplementedProviderServer
	p Plugin

	mu sync.Mutex
	// pools are the pools of the last Configure the plugin accepted (nil
	// before one): the only ones it is asked about.
	pools map[string]bool
}

// configured refuses a call about pools the plugin was not configured
// with (or before it was configured at all).
func (s *server) configured(pools ...*pb.Pool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools == nil {
		return status.Error(codes.FailedPrecondition, "the plugin is not configured yet (Configure comes first)")
	}
	for _, p := range pools {
		if !s.pools[p.GetName()] {
			return status.Errorf(codes.FailedPrecondition, "pool %q is not among the pools the plugin was configured with", p.GetName())
		}
	}
	return nil
}

func (s *server) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	_, protector := s.p.Provider.(providers.Protector)
	_, reaper := s.p.Provider.(providers.Reaper)
	_, identity := s.p.Provider.(providers.IdentityVerifier)
	return &pb.InfoResponse{Name: s.p.Name, Version: s.p.Version, Protector: protector, Reaper: reaper, Identity: identity}, nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	out := &pb.ConfigureResponse{}
	var pools []fleet.Pool
	for _, p := range req.GetPools() {
		pools = append(pools, poolFromWire(p))
	}
	if s.p.Configure != nil {
		for _, d := range s.p.Configure(ctx, req.GetConfig().AsMap(), pools, req.GetFleet()) {
			out.Diagnostics = append(out.Diagnostics, &pb.Diagnostic{Path: d.Path, Summary: d.Summary, Detail: d.Detail})
		}
	}
	if len(out.Diagnostics) == 0 {
		names := map[string]bool{}
		for _, p := range pools {
			names[p.Name] = true
		}
		s.mu.Lock()
		s.pools = names
		s.mu.Unlock()
	}
	return out, nil
}

func (s *server) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if err := s.configured(req.GetPool()); err != nil {
		return nil, err
	}
	g, err := s.p.Provider.Describe(ctx, poolFromWire(req.GetPool()))
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.DescribeResponse{Group: groupToWire(g)}, nil
}

func (s *server) Launch(ctx context.Context, req *pb.LaunchRequest) (*pb.LaunchResponse, error) {
	if err := s.configured(req.GetPool()); err != nil {
		return nil, err
	}
	err := s.p.Provider.Launch(ctx, poolFromWire(req.GetPool()), providers.LaunchRequest{Count: int(req.GetCount()), Target: int(req.GetTarget()), Key: req.GetKey(), Fleet: req.GetFleet(), Names: req.GetNames()})
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.LaunchResponse{}, nil
}

func (s *server) Terminate(ctx context.Context, req *pb.TerminateRequest) (*pb.TerminateResponse, error) {
	if err := s.configured(req.GetPool()); err != nil {
		return nil, err
	}
	if err := s.p.Provider.Terminate(ctx, poolFromWire(req.GetPool()), req.GetInstanceIds()); err != nil {
		return nil, statusOf(err)
	}
	return &pb.TerminateResponse{}, nil
}

func (s *server) SetProtected(ctx context.Context, req *pb.SetProtectedRequest) (*pb.SetProtectedResponse, error) {
	pr, ok := s.p.Provider.(providers.Protector)
	if !ok {
		return s.UnimplementedProviderServer.SetProtected(ctx, req)
	}
	if err := s.configured(req.GetPool()); err != nil {
		return nil, err
	}
	if err := pr.SetProtected(ctx, poolFromWire(req.GetPool()), req.GetInstanceIds(), req.GetProtected()); err != nil {
		return nil, statusOf(err)
	}
	return &pb.SetProtectedResponse{}, nil
}

func (s *server) Orphans(ctx context.Context, req *pb.OrphansRequest) (*pb.OrphansResponse, error) {
	r, ok := s.p.Provider.(providers.Reaper)
	if !ok {
		return s.UnimplementedProviderServer.Orphans(ctx, req)
	}
	if err := s.configured(req.GetPools()...); err != nil {
		return nil, err
	}
	var pools []fleet.Pool
	for _, p := range req.GetPools() {
		pools = append(pools, poolFromWire(p))
	}
	os, err := r.Orphans(ctx, req.GetFleet(), pools)
	if err != nil {
		return nil, statusOf(err)
	}
	out := &pb.OrphansResponse{}
	for _, o := range os {
		g := groupToWire(providers.Group{Instances: []providers.Instance{o.Instance}})
		out.Orphans = append(out.Orphans, &pb.Orphan{Instance: g.Instances[0], Pool: o.Pool, Via: o.Via.Name})
	}
	return out, nil
}

func (s *server) TerminateOrphan(ctx context.Context, req *pb.TerminateOrphanRequest) (*pb.TerminateOrphanResponse, error) {
	r, ok := s.p.Provider.(providers.Reaper)
	if !ok {
		return s.UnimplementedProviderServer.TerminateOrphan(ctx, req)
	}
	if err := s.configured(req.GetVia()); err != nil {
		return nil, err
	}
	g, err := groupFromWire(req.GetVia().GetName(), &pb.Group{Instances: []*pb.Instance{req.GetOrphan().GetInstance()}})
	if err != nil {
		return nil, statusOf(&providers.RefusedError{Pool: req.GetVia().GetName(), Err: err})
	}
	o := providers.Orphan{Instance: g.Instances[0], Pool: req.GetOrphan().GetPool(), Via: poolFromWire(req.GetVia())}
	if err := r.TerminateOrphan(ctx, req.GetFleet(), o); err != nil {
		return nil, statusOf(err)
	}
	return &pb.TerminateOrphanResponse{}, nil
}

func (s *server) VerifyIdentity(ctx context.Context, req *pb.VerifyIdentityRequest) (*pb.VerifyIdentityResponse, error) {
	v, ok := s.p.Provider.(providers.IdentityVerifier)
	if !ok {
		return s.UnimplementedProviderServer.VerifyIdentity(ctx, req)
	}
	if err := s.configured(req.GetPool()); err != nil {
		return nil, err
	}
	if err := v.VerifyIdentity(ctx, poolFromWire(req.GetPool()), req.GetNode(), req.GetDocument()); err != nil {
		return nil, statusOf(err)
	}
	return &pb.VerifyIdentityResponse{}, nil
}

// configToWire is a plugin's config block as the protocol carries it.
func configToWire(config map[string]any) (*structpb.Struct, error) {
	s, err := structpb.NewStruct(config)
	if err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	return s, nil
}
