package agentcmd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/agent/spot"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// Prog is the agent's command: autoscaler-agent.
const Prog = "autoscaler-agent"

// ExitNoNVML is the agent's exit status when NVML's library is missing and
// it was not told to run without GPU data.
const ExitNoNVML = 3

const defaultSocket = "/run/fleetcast/agent.sock"

// DefaultSocketGroup is the group whose members may use the agent's local
// API (register jobs, report checkpoints) when the machine has it; the
// Terraform examples' node setup makes it.
const DefaultSocketGroup = "fleetcast"

// Env is what the agent's command runs with: its output streams, its
// version, and the machine's GPUs.
type Env struct {
	Stdout, Stderr io.Writer
	// Version is the build's version (autoscaler-agent version).
	Version string
	// OpenGPUs opens the machine's GPUs: NVML's library in the agent's
	// binary (OpenWith(gpu.OpenSystem)), go-nvml's mock machines in tests.
	// An error whose NoLibrary method returns true (agent/gpu's
	// ErrNoLibrary), or a nil OpenGPUs, means the machine (or the build)
	// has no NVML: the agent says so and exits with ExitNoNVML, unless told
	// to run without GPU data.
	OpenGPUs func() (GPUs, error)
}

// GPUs is a machine's GPUs, open: read them, then close them.
type GPUs interface {
	agent.GPUReader
	Close() error
}

// OpenWith is an Env's OpenGPUs from a function that opens a reader of
// its own type (gpu.OpenSystem, gpu.Open of a mock).
func OpenWith[R GPUs](open func() (R, error)) func() (GPUs, error) {
	return func() (GPUs, error) {
		r, err := open()
		if err != nil {
			return nil, err // not r: a nil *gpu.Reader in an interface is not nil
		}
		return r, nil
	}
}

// noLibrary is the error that says NVML's library is missing
// (agent/gpu.ErrNoLibrary).
type noLibrary interface{ NoLibrary() bool }

// errNoGPUReader is the agent's error when its build reads no GPUs.
var errNoGPUReader = errors.New("this build of the agent reads no GPUs (no NVML): run autoscaler-agent from a release, or without GPU data (-no-gpu)")

// missingLibrary reports whether err says NVML's library is missing.
func missingLibrary(err error) bool {
	var nl noLibrary
	return errors.Is(err, errNoGPUReader) || errors.As(err, &nl) && nl.NoLibrary()
}

// Run runs the agent's command line (the words after autoscaler-agent) and
// returns its exit status: flags alone run the agent, the node's daemon;
// register, checkpoint and done are a job's reports to it, status asks it
// what it knows, version prints the build's.
func Run(e *Env, args []string) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "register", "checkpoint", "done":
			return runAgentJob(e, args[0], args[1:])
		case "status":
			return runAgentStatus(e, args[1:])
		case "version":
			fs := cli.NewFlagSet(e.Stderr, Prog, "version", "version")
			if _, code, ok := cli.Setup(e.Stderr, fs, args[1:]); !ok {
				return code
			}
			fmt.Fprintln(e.Stdout, cli.Version(Prog, e.Version))
			return cli.ExitOK
		case "help":
			printUsage(e.Stderr)
			return cli.ExitOK
		}
		fmt.Fprintf(e.Stderr, "%s: unknown command %q; want register, checkpoint, done, status or version (or flags to run the agent)\n", Prog, args[0])
		return cli.ExitUsage
	}
	if len(args) == 0 {
		printUsage(e.Stderr)
		return cli.ExitUsage
	}
	fs := cli.NewFlagSet(e.Stderr, Prog, "agent", "-controller URL -token-file FILE [-bootstrap-token-file FILE] [-ca-file FILE] -node NAME [flags]")
	controller := fs.String("controller", "", "the controller's URL, e.g. https://fleetcast.internal:8790 (plain http only to a loopback address, or with -insecure)")
	tokenFile := fs.String("token-file", "", "file holding this node's credential, mode 0600 (never logged); written by a bootstrap or a rotation")
	bootstrapFile := fs.String("bootstrap-token-file", "", "file holding the fleet's bootstrap secret, mode 0600: with the instance's signed identity it gets the node its credential when -token-file holds none or the controller refuses it (empty: no bootstrap)")
	identity := fs.String("identity", "aws", "the instance identity a bootstrap presents: aws (the instance identity document from the metadata service, with -bootstrap-token-file), gcp (the identity token Compute Engine's metadata server signs for -gcp-audience: no bootstrap secret), or command (what -identity-command prints, which the pool's provider plugin checks, with -bootstrap-token-file)")
	identityCommand := fs.String("identity-command", "", "for -identity command: the command (split at spaces) that prints this node's identity document for its pool's plugin to check, such as a host key's signature (at most 16 KiB, within 30 s)")
	gcpAudience := fs.String("gcp-audience", "", "the audience of the identity token for -identity gcp: the controller's controller.gcp_identity_audience (empty: -controller)")
	caFile := fs.String("ca-file", "", "PEM file of the CA(s) that sign the controller's certificate (default: the system's)")
	insecure := fs.Bool("insecure", false, "allow plain http to a controller that is not on loopback (the credential then crosses the network in the clear)")
	rotateEvery := cli.Duration{D: 24 * time.Hour}
	fs.Var(&rotateEvery, "rotate-every", "rotate the node credential once it is this old (0: never)")
	host, _ := os.Hostname()
	node := fs.String("node", host, "this node's name as the controller knows it (the instance ID)")
	pool := fs.String("pool", "", "the pool the node belongs to (for logs)")
	socket := fs.String("socket", defaultSocket, "the local API's unix socket, for jobs (who may use it: -socket-group, -socket-mode)")
	socketGroup := fs.String("socket-group", DefaultSocketGroup, "group (name or number) whose members may use the socket: jobs' users must be in it; a group named here must exist, while the default, when missing, leaves the socket to its owner with a warning (empty: the agent's own group)")
	socketMode := fs.String("socket-mode", "0660", "the socket's permission bits, in octal: 0660 lets -socket-group's members register jobs, 0600 the agent's own user alone")
	marker := fs.String("marker", "/run/fleetcast/draining", "file that exists while the node drains, for a local scheduler")
	hook := fs.String("drain-hook", "", "command (split at spaces; use a script for anything more) run when a drain starts (FLEETCAST_DRAIN=start) and when it fails or is cancelled (=stop)")
	noGPU := fs.Bool("no-gpu", false, "run without GPU data (CPU nodes, tests)")
	stateFile := fs.String("state", "/var/lib/fleetcast/agent-state.json", "file keeping the registered jobs across restarts of the agent (empty: none; a restarted agent then forgets its jobs until they register again)")
	metrics := fs.String("metrics", "127.0.0.1:9401", "address serving Prometheus metrics at /metrics (empty: none)")
	notices := fs.String("notices", "aws", "where spot notices come from: aws (the instance metadata service, IMDSv2), gcp (Compute Engine's metadata server, instance/preempted) or none")
	imdsEndpoint := fs.String("imds-endpoint", "", "the instance metadata service's URL (default the SDK's, http://169.254.169.254)")
	gceEndpoint := fs.String("gce-metadata-endpoint", spot.GCEMetadataEndpoint, "Compute Engine's metadata server's base URL, for -notices gcp and -identity gcp")
	noticeSignal := fs.String("notice-signal", "SIGUSR1", "signal sent to every job on a spot interruption notice or rebalance recommendation")
	noticeInterval := cli.Duration{D: spot.DefaultInterval, Positive: true}
	fs.Var(&noticeInterval, "notice-interval", "time between polls of the metadata service")
	interval := cli.Duration{D: 10 * time.Second, Positive: true}
	longRunning := cli.Duration{D: time.Hour, Positive: true}
	fs.Var(&interval, "interval", "time between reports")
	fs.Var(&longRunning, "long-running-after", "a job older than this is reported long-running, a label (every job must checkpoint or exit before its node may go); drain.long_running_after")
	log, code, ok := cli.Setup(e.Stderr, fs, args)
	if !ok {
		return code
	}
	if *controller == "" || *tokenFile == "" || *node == "" {
		fmt.Fprintln(e.Stderr, "agent: -controller, -token-file and -node are required")
		return cli.ExitUsage
	}
	client, err := controllerClient(*controller, *caFile, *insecure)
	if err != nil {
		fmt.Fprintln(e.Stderr, "agent:", err)
		return cli.ExitUsage
	}
	if *identity != "aws" && *identity != "gcp" && *identity != "command" {
		fmt.Fprintf(e.Stderr, "agent: -identity %q, want aws, gcp or command\n", *identity)
		return cli.ExitUsage
	}
	if (*identity == "command") != (strings.TrimSpace(*identityCommand) != "") || *identity == "command" && *bootstrapFile == "" {
		fmt.Fprintln(e.Stderr, "agent: -identity command, -identity-command and -bootstrap-token-file go together")
		return cli.ExitUsage
	}
	if *notices != "aws" && *notices != "gcp" && *notices != "none" {
		fmt.Fprintf(e.Stderr, "agent: -notices %q, want aws, gcp or none\n", *notices)
		return cli.ExitUsage
	}
	groupGiven := false
	fs.Visit(func(f *flag.Flag) { groupGiven = groupGiven || f.Name == "socket-group" })
	access, warning, err := socketAccess(*socketGroup, groupGiven, *socketMode, lookupGroup)
	if err != nil {
		fmt.Fprintln(e.Stderr, "agent:", err)
		return cli.ExitUsage
	}
	if warning != "" {
		log.Warn(warning)
	}
	cred := &agent.Credential{File: *tokenFile, BootstrapFile: *bootstrapFile, Controller: *controller, Node: *node, Client: client, Log: log.Named("credential")}
	if *identity == "gcp" {
		audience := cmp.Or(*gcpAudience, *controller)
		cred.IdentityOnly = true
		cred.Identity = func(ctx context.Context) (*report.CredentialRequest, error) {
			return gcpIdentity(ctx, *gceEndpoint, audience)
		}
	} else if *bootstrapFile != "" && *identity == "command" {
		argv := strings.Fields(*identityCommand)
		cred.Identity = func(ctx context.Context) (*report.CredentialRequest, error) { return commandIdentity(ctx, argv) }
	} else if *bootstrapFile != "" {
		md := imds.New(imds.Options{Endpoint: *imdsEndpoint})
		cred.Identity = func(ctx context.Context) (*report.CredentialRequest, error) { return awsIdentity(ctx, md) }
	} else if _, err := cred.Token(context.Background()); err != nil {
		// No way to get one: say so now rather than retry forever.
		fmt.Fprintln(e.Stderr, "agent:", err)
		return cli.ExitError
	}
	cfg := agent.Config{Node: *node, LongRunningAfter: longRunning.D, MarkerFile: *marker, NoticeSignal: *noticeSignal, StateFile: *stateFile}
	if *hook != "" {
		cfg.DrainHook = strings.Fields(*hook)
	}
	if !*noGPU {
		var r GPUs
		err := errNoGPUReader
		if e.OpenGPUs != nil {
			r, err = e.OpenGPUs()
		}
		if missingLibrary(err) {
			fmt.Fprintln(e.Stderr, "agent:", err)
			return ExitNoNVML
		}
		if err != nil {
			fmt.Fprintln(e.Stderr, "agent:", err)
			return cli.ExitError
		}
		defer r.Close()
		cfg.GPUs = r
	}
	if *stateFile != "" {
		if err := os.MkdirAll(filepath.Dir(*stateFile), 0o700); err != nil {
			fmt.Fprintln(e.Stderr, "agent: state:", err)
			return cli.ExitError
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		fmt.Fprintln(e.Stderr, err)
		return cli.ExitError
	}
	l, err := agent.ListenUnixAccess(*socket, access)
	if err != nil {
		fmt.Fprintln(e.Stderr, err)
		return cli.ExitError
	}
	api := agent.NewLocalServer(a)
	go api.Serve(l)
	defer api.Close()
	if *metrics != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.MetricsHandler())
		ms := &http.Server{Addr: *metrics, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := ms.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("metrics endpoint", "address", *metrics, "error", err)
			}
		}()
		defer ms.Close()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("agent started", "node", *node, "pool", *pool, "controller", *controller, "socket", *socket,
		"socket_mode", fmt.Sprintf("%#o", uint32(access.Mode)), "socket_gid", access.GID, "gpus", cfg.GPUs != nil, "notices", *notices)
	if *notices != "none" {
		w := &spot.Watcher{Client: imds.New(imds.Options{Endpoint: *imdsEndpoint}), Interval: noticeInterval.D, Log: log.Named("notices"), Gone: a.Withdraw}
		if *notices == "gcp" {
			w.Source = &spot.GCE{Endpoint: *gceEndpoint}
		}
		go w.Run(ctx, func(n report.Notice) {
			if err := a.Warn(n); err != nil {
				log.Warn("spot notice not acted on", "kind", n.Kind, "error", err)
			}
		})
	}
	rep := &agent.Reporter{Agent: a, Controller: *controller, Credential: cred, Interval: interval.D, RotateEvery: rotateEvery.D,
		Client: client, Log: log, Notify: sdNotify}
	if err := rep.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(e.Stderr, "agent:", err)
		return cli.ExitError
	}
	log.Info("agent stopped")
	return cli.ExitOK
}

// runAgentJob is what a job (or its launcher) runs to tell the agent about
// itself.
func runAgentJob(e *Env, cmd string, args []string) int {
	fs := cli.NewFlagSet(e.Stderr, Prog, "agent "+cmd, cmd+" -job ID [flags]")
	id := fs.String("job", "", "the job's ID")
	socket := fs.String("socket", defaultSocket, "the agent's unix socket")
	var gpus, pids, watch, ends, team, tier, name, submitted string
	if cmd == "register" {
		fs.StringVar(&team, "team", "", "who the job belongs to (its scheduler's account, say), for the cost and queue-time report per team: letters, digits and ._-:@+, at most 64 bytes (empty: unattributed)")
		fs.StringVar(&tier, "tier", "", "the job's class of service (its QOS or partition, say), for the report per tier: letters, digits and ._-:@+, at most 64 bytes (empty: unattributed)")
		fs.StringVar(&name, "name", "", "what the job's owner calls it: letters, digits and ._-:@+, at most 64 bytes")
		fs.StringVar(&submitted, "submitted", "", "when the job was submitted to its scheduler, an RFC 3339 time, for its queue time: not after now (the job's start)")
		fs.StringVar(&ends, "expected-end", "", "when the job expects to end (its time limit): an RFC 3339 time or a duration from now, e.g. 6h; a hint the controller may wait for instead of a launch or of draining this node, never a reason to drain")
		fs.StringVar(&gpus, "gpus", "", "comma-separated GPU indexes the job holds, e.g. 0,1")
		fs.StringVar(&watch, "checkpoints", "", "glob of the job's checkpoint files, e.g. '/ckpt/train-7/*.pt': a newer file counts as a checkpoint")
		fs.StringVar(&pids, "pid", "", "comma-separated IDs of the job's processes that use the GPUs (required: a launcher that exits is not the job)")
	}
	fs.Int("step", 0, "the training step checkpointed (informational)")
	_, code, ok := cli.Setup(e.Stderr, fs, args)
	if !ok {
		return code
	}
	if *id == "" {
		fmt.Fprintf(e.Stderr, "agent %s: -job ID is required\n", cmd)
		return cli.ExitUsage
	}
	c := agent.Dial(*socket)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var err error
	switch cmd {
	case "register":
		var req agent.JobRequest
		req.ID, req.Checkpoints = *id, watch
		if req.GPUs, err = ints(gpus); err == nil {
			req.PIDs, err = ints(pids)
		}
		if err == nil && len(req.PIDs) == 0 {
			err = errors.New("-pid is required: the IDs of the job's processes that use the GPUs")
		}
		if err == nil && ends != "" {
			req.ExpectedEnd, err = expectedEnd(ends, time.Now())
		}
		if err == nil {
			req.Team, req.Tier, req.Name, err = registerLabels(team, tier, name)
		}
		if err == nil && submitted != "" {
			req.Submitted, err = submittedAt(submitted, time.Now())
		}
		if err != nil {
			fmt.Fprintf(e.Stderr, "agent register: %v\n", err)
			return cli.ExitUsage
		}
		err = c.Register(ctx, req)
	case "checkpoint":
		err = c.Checkpoint(ctx, *id)
	case "done":
		err = c.Unregister(ctx, *id)
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "agent %s: %v\n", cmd, err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// socketAccess is who may use the agent's local API, from -socket-group
// (given says whether it was on the command line) and -socket-mode. A
// group given must exist: lookup finds its ID. The default group, when the
// machine lacks it, leaves the socket to its owner (the mode's group bits
// dropped), and warning says so, for the log; the agent still starts, so a
// node without the group keeps working for root's jobs. An empty group
// keeps the agent's own.
func socketAccess(group string, given bool, mode string, lookup func(string) (int, error)) (access agent.SocketAccess, warning string, err error) {
	m, err := strconv.ParseUint(strings.TrimPrefix(mode, "0o"), 8, 32)
	if err != nil || m > 0o777 {
		return access, "", fmt.Errorf("-socket-mode %q: want octal permission bits such as 0660 (0777 at most)", mode)
	}
	access = agent.SocketAccess{Mode: fs.FileMode(m), GID: -1}
	if access.Mode&0o600 != 0o600 {
		return access, "", fmt.Errorf("-socket-mode %q: the owner must be able to read and write (0600 at least)", mode)
	}
	if group == "" {
		return access, "", nil
	}
	gid, err := lookup(group)
	var unknown user.UnknownGroupError
	var unknownID user.UnknownGroupIdError
	missing := errors.As(err, &unknown) || errors.As(err, &unknownID)
	switch {
	case err == nil:
		access.GID = gid
		return access, "", nil
	case given && missing:
		return access, "", fmt.Errorf("-socket-group %q: no such group on this machine: make it (groupadd --system %s) and add the jobs' users to it, or name another", group, group)
	case given:
		return access, "", fmt.Errorf("-socket-group %q: %w", group, err)
	}
	why := "does not exist"
	if !missing {
		why = fmt.Sprintf("cannot be looked up (%v)", err)
	}
	access.Mode &^= 0o070
	return access, fmt.Sprintf("socket group %q %s: the local API's socket is %#o, so only jobs running as the agent's own user can register; make the group (groupadd --system %s) and add the jobs' users to it",
		group, why, uint32(access.Mode), group), nil
}

// lookupGroup returns the ID of a group given by name or number, which the
// machine's group database must have.
func lookupGroup(group string) (int, error) {
	var g *user.Group
	var err error
	if _, nerr := strconv.Atoi(group); nerr == nil {
		g, err = user.LookupGroupId(group)
	} else {
		g, err = user.LookupGroup(group)
	}
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(g.Gid)
}

// expectedEnd parses -expected-end: an RFC 3339 time, or a duration from
// now ("6h", "2d"), in the future either way.
func expectedEnd(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, derr := fleet.ParseDuration(s)
		if derr != nil {
			return time.Time{}, fmt.Errorf("-expected-end %q: want an RFC 3339 time (2026-12-02T18:00:00Z) or a duration from now (6h)", s)
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("-expected-end %q: %s is not in the future", s, t.Format(time.RFC3339))
	}
	return t, nil
}

// registerLabels checks -team, -tier and -name (fleet.ValidLabel) and returns
// them, or an error naming the first flag that is wrong.
func registerLabels(team, tier, name string) (string, string, string, error) {
	for _, l := range [...]struct{ flag, value string }{{"-team", team}, {"-tier", tier}, {"-name", name}} {
		if msg := fleet.ValidLabel(l.value); msg != "" {
			return "", "", "", fmt.Errorf("%s: %s", l.flag, msg)
		}
	}
	return team, tier, name, nil
}

// submittedAt parses -submitted: an RFC 3339 time not after now, for a
// job registering as it starts.
func submittedAt(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-submitted %q: want an RFC 3339 time (2026-12-02T18:00:00Z), when the job was submitted to its scheduler", s)
	}
	if t.After(now) {
		return time.Time{}, fmt.Errorf("-submitted %q: %s is in the future: want when the job was submitted to its scheduler, before it started", s, t.Format(time.RFC3339))
	}
	return t, nil
}

// ints parses a comma-separated list of whole numbers.
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// controllerClient is the agent's HTTP client for the controller: HTTPS
// verified against caFile (or the system's roots), or plain HTTP to a
// loopback address, or anywhere with insecure.
func controllerClient(controller, caFile string, insecure bool) (*http.Client, error) {
	u, err := url.Parse(controller)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-controller %q: want an https URL such as https://fleetcast.internal:8790", controller)
	}
	if u.Scheme == "http" && !insecure {
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("-controller %s is plain http to a host other than loopback: the node's credential would cross the network in the clear; use https (and -ca-file), or -insecure to accept it", controller)
		}
	}
	tr, _, err := cli.TLSTransport(caFile)
	if err != nil {
		return nil, fmt.Errorf("-ca-file: %w", err)
	}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}, nil
}

// awsIdentity reads the instance identity document and its signature from
// the metadata service (IMDSv2).
func awsIdentity(ctx context.Context, md *imds.Client) (*report.CredentialRequest, error) {
	read := func(path string) (string, error) {
		out, err := md.GetDynamicData(ctx, &imds.GetDynamicDataInput{Path: path})
		if err != nil {
			return "", fmt.Errorf("metadata %s: %w", path, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(io.LimitReader(out.Content, 64<<10))
		return string(b), err
	}
	doc, err := read("instance-identity/document")
	if err != nil {
		return nil, err
	}
	sig, err := read("instance-identity/signature")
	if err != nil {
		return nil, err
	}
	return &report.CredentialRequest{AWS: &report.AWSIdentity{Document: doc, Signature: sig}}, nil
}

// gcpIdentity reads the identity token Compute Engine's metadata server
// signs for the instance and audience, with the instance's claims
// (format=full).
func gcpIdentity(ctx context.Context, endpoint, audience string) (*report.CredentialRequest, error) {
	path := "instance/service-accounts/default/identity?" + url.Values{"audience": {audience}, "format": {"full"}}.Encode()
	b, err := spot.GCEGet(ctx, nil, endpoint, path, 16<<10)
	if err != nil {
		return nil, err
	}
	return &report.CredentialRequest{GCP: &report.GCPIdentity{Token: strings.TrimSpace(string(b))}}, nil
}

// commandIdentity runs the node's identity command and presents what it
// prints (at most plugin.MaxIdentity bytes, trimmed) for the pool's
// plugin to check.
func commandIdentity(ctx context.Context, argv []string) (*report.CredentialRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("-identity-command %s: %w: %s", argv[0], err, strings.TrimSpace(stderr.String()))
	}
	doc := strings.TrimSpace(string(out))
	if doc == "" || len(doc) > plugin.MaxIdentity {
		return nil, fmt.Errorf("-identity-command %s printed %d bytes; want 1 to %d", argv[0], len(doc), plugin.MaxIdentity)
	}
	if !utf8.ValidString(doc) {
		return nil, fmt.Errorf("-identity-command %s printed bytes that are not text (UTF-8): encode a binary document, such as a signature, in base64", argv[0])
	}
	return &report.CredentialRequest{Plugin: &report.PluginIdentity{Document: doc}}, nil
}

// sdNotify tells systemd the agent's state (the sd_notify protocol), when
// it runs as a Type=notify unit: "READY=1" once it reports, "STATUS=..."
// with what it does. Nothing without $NOTIFY_SOCKET.
func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	conn.Write([]byte(state))
}

// printUsage prints the agent's commands.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %[1]s -controller URL -token-file FILE -node NAME [flags]
       %[1]s COMMAND [flags]

The Fleetcast agent: it runs on every node, reads the GPUs through NVML,
knows the node's jobs and their checkpoints, and reports to the controller.

Commands (a job's, on its node):
  register    a job tells the agent it runs here (its GPUs, its process)
  checkpoint  a job reports a checkpoint it wrote
  done        a job tells the agent it ended
  status      what the agent knows: jobs, checkpoints, drain, GPUs, reports
  version     print the version

Run '%[1]s -h' for the agent's flags, '%[1]s COMMAND -h' for a command's.
`, Prog)
}
