// Command fleetcast-commands is a Fleetcast provider plugin for pools of
// servers the operator powers on and off with commands of their own (IPMI,
// Redfish, a bare-metal API, Slurm's power-saving scripts), with no Go to
// write. It is the shape of Slurm's ResumeProgram and SuspendProgram:
//
//   - list_command prints the pool's servers and their power states, as
//     JSON: {"nodes": [{"name": "gpu-01", "state": "off"}, ...]}. A state
//     is "off" (powered off, free to power on), "booting", "on",
//     "stopping", or "failed" (neither in the pool nor free). A node may
//     also say "zone" (a rack), "since" (RFC 3339: when it was powered
//     on) and "address" (where it is reached: a pool of Slurm nodes has
//     Slurm reach the node there). A server it cannot read must fail the listing (exit non-zero),
//     not be left out: one left out counts as gone.
//   - launch_command is run with the names of the servers to power on as
//     its arguments; terminate_command with those to power off. Each
//     exits 0 when done; 75 (EX_TEMPFAIL) from launch_command says the
//     servers cannot be powered on now (no capacity: the pool backs off,
//     and the controller falls back to other pools); any other status
//     fails the call, with the command's stderr.
//   - verify_command (optional) checks the identity a server presents
//     when its agent bootstraps (agent -identity command): it is run with
//     the server's name as its argument and the document on its stdin,
//     and exits 0 to accept it (75 when it cannot tell now). Without it, servers need credentials an
//     operator issues (autoscaler token issue).
//
// A launch grows the pool to its target: the servers listed "booting" or
// "on" count, and free ones are powered on to reach it, in name order (so
// a retry, or a restarted controller, powers on nothing twice); a launch
// that names servers (a pool of Slurm nodes, whose names the controller
// binds) powers on those alone. With
// too few free, it powers on those there are and answers that capacity
// ran out.
//
// Every command runs with the plugin's environment (the plugin block's
// env, nothing of the controller's), and FLEETCAST_POOL, FLEETCAST_FLEET,
// FLEETCAST_LAUNCH_KEY (launches), and FLEETCAST_TARGET_<NAME> for each
// attribute of the pool's target block (its name upper-cased), so one set
// of scripts serves several pools. A command is a list: its executable,
// an absolute path, then arguments; no shell is involved.
//
//	plugin "racks" {
//	  path   = "/usr/local/libexec/fleetcast/fleetcast-commands"
//	  sha256 = "..."
//	  config {
//	    list_command      = ["/etc/fleetcast/racks", "list"]
//	    launch_command    = ["/etc/fleetcast/racks", "power-on"]
//	    terminate_command = ["/etc/fleetcast/racks", "power-off"]
//	    verify_command    = ["/etc/fleetcast/racks", "verify"]
//	    timeout           = "20s"
//	  }
//	}
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/sdk"
)

// version is the plugin's version, for `autoscaler plugins`.
const version = "0.1.0"

// tempFail is launch_command's exit status for "no capacity now"
// (sysexits.h's EX_TEMPFAIL).
const tempFail = 75

// Limits on what a command may print and how long it may run.
const (
	maxOutput      = 4 << 20
	defaultTimeout = 20 * time.Second
	// maxTimeout stays below the controller's deadline for a call (30 s);
	// each command is also cut deadlineMargin before the call's deadline,
	// so that a slow command fails as itself.
	maxTimeout     = 25 * time.Second
	deadlineMargin = time.Second
)

// settings are the plugin's config block.
type settings struct {
	list, launch, terminate, verify []string
	timeout                         time.Duration
	fleet                           string
}

// commands is the provider: it runs the operator's commands.
type commands struct {
	// act makes one launch or termination at a time: each lists, then
	// acts on what it listed.
	act sync.Mutex
	mu  sync.Mutex
	cfg settings
	// seen is when each powered-on server was first listed so, by pool
	// and name (seenKey), for those whose list gives no "since".
	seen map[string]time.Time
	now  func() time.Time
	log  hclog.Logger
	// groups are the commands running, by process (group) ID: killed
	// when the plugin stops.
	groups map[int]bool
}

// running notes a command's process group as running, or not.
func (c *commands) running(pid int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[int]bool{}
	}
	if on {
		c.groups[pid] = true
	} else {
		delete(c.groups, pid)
	}
}

// stop kills the commands still running (with their process groups):
// none outlives the plugin.
func (c *commands) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid := range c.groups {
		killGroup(pid) //nolint:errcheck // gone already is fine
	}
}

// node is one server of list_command's answer.
type node struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Zone  string `json:"zone,omitempty"`
	Since string `json:"since,omitempty"`
	// Address is where the server is reached (an IP address or a host
	// name), for Slurm: a pool of Slurm nodes sets its node's address.
	Address string `json:"address,omitempty"`
}

// The power states list_command reports.
const (
	stateOff      = "off"
	stateBooting  = "booting"
	stateOn       = "on"
	stateStopping = "stopping"
	stateFailed   = "failed"
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// settings are the config Configure accepted.
func (c *commands) settings() settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// pluginVars are the variables go-plugin sets for its handshake, beside
// the cookie (sdk.MagicCookieKey): not the commands' business.
var pluginVars = []string{"PLUGIN_MIN_PORT", "PLUGIN_MAX_PORT", "PLUGIN_PROTOCOL_VERSIONS", "PLUGIN_CLIENT_CERT",
	"PLUGIN_MULTIPLEX_GRPC", "PLUGIN_UNIX_SOCKET_DIR", "PLUGIN_UNIX_SOCKET_GROUP", sdk.MagicCookieKey}

// commandEnv is the plugin's environment less go-plugin's own variables.
func commandEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(pluginVars, name)
	})
}

// run runs a command with the pool's environment and extra arguments,
// within the timeout, and returns its stdout. A failure names the command
// and carries its exit status and stderr.
func (c *commands) run(ctx context.Context, what string, argv []string, pool fleet.Pool, env []string, stdin string, args ...string) ([]byte, error) {
	cfg := c.settings()
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: the plugin is not configured", what)
	}
	// Within the timeout, and within the call's deadline less a margin, so
	// that a slow command fails as itself, in time for the answer to reach
	// the controller.
	timeout := cfg.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-deadlineMargin)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%s %s: not started, the call's deadline is too near", what, argv[0])
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], append(slices.Clone(argv[1:]), args...)...)
	cmd.Env = append(append(commandEnv(os.Environ()), "FLEETCAST_FLEET="+cfg.fleet), append(poolEnv(pool), env...)...)
	// Its own process group, killed whole: a script's children (ipmitool)
	// stop with it.
	groupKill(cmd)
	cmd.WaitDelay = time.Second // its children holding the pipes open do not hold the call
	var stdout, stderr limited
	stdout.max, stderr.max = maxOutput, 4096
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Start()
	if err == nil {
		c.running(cmd.Process.Pid, true)
		err = cmd.Wait()
		c.running(cmd.Process.Pid, false)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("%s %s was stopped: the call was cancelled (%w); stderr: %s", what, argv[0], ctx.Err(), strings.TrimSpace(stderr.String()))
	case err != nil && cctx.Err() != nil:
		return nil, fmt.Errorf("%s %s did not finish within %s; stderr: %s", what, argv[0], timeout.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return nil, &commandError{what: what, path: argv[0], err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	if stdout.over {
		return nil, fmt.Errorf("%s %s printed more than %d bytes", what, argv[0], maxOutput)
	}
	return stdout.Bytes(), nil
}

// commandError is a command that failed: its exit status and stderr.
type commandError struct {
	what, path, stderr string
	err                error
}

func (e *commandError) Unwrap() error { return e.err }

func (e *commandError) Error() string {
	msg := fmt.Sprintf("%s %s: %v", e.what, e.path, e.err)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

// exitCode is the command's exit status, -1 if it did not exit.
func (e *commandError) exitCode() int {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// limited keeps the first max bytes written to it.
type limited struct {
	bytes.Buffer
	max  int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); len(p) > room {
		l.over = true
		l.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

var _ io.Writer = (*limited)(nil)

// poolEnv is the environment a pool's commands get: its name, its fleet,
// its target block's attributes.
func poolEnv(pool fleet.Pool) []string {
	env := []string{"FLEETCAST_POOL=" + pool.Name}
	target := sdk.Target(pool)
	names := make([]string, 0, len(target))
	for k := range target {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		env = append(env, "FLEETCAST_TARGET_"+strings.ToUpper(k)+"="+scalar(target[k]))
	}
	return env
}

// scalar is a target attribute's value as text (Configure accepts only
// strings, numbers and bools).
func scalar(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64) // 1234567, not 1.234567e+06
	}
	return fmt.Sprint(v)
}

// list runs list_command for the pool and checks its answer.
func (c *commands) list(ctx context.Context, pool fleet.Pool) ([]node, error) {
	out, err := c.run(ctx, "list_command", c.settings().list, pool, nil, "")
	if err != nil {
		return nil, err
	}
	return parseList(out)
}

// parseList checks list_command's answer: a JSON object with a "nodes"
// list, each with a valid name (once) and a known state.
func parseList(out []byte) ([]node, error) {
	var ans struct {
		Nodes *[]node `json:"nodes"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ans); err != nil {
		return nil, fmt.Errorf("list_command: its output is not {\"nodes\": [...]}: %w", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, errors.New("list_command: its output goes on after the {\"nodes\": [...]} object")
	}
	if ans.Nodes == nil {
		return nil, errors.New(`list_command: its output has no "nodes" list`)
	}
	names := map[string]bool{}
	for i, n := range *ans.Nodes {
		if !nameRE.MatchString(n.Name) {
			return nil, fmt.Errorf("list_command: nodes[%d]: name %q: want letters, digits and . _ : - (at most 253)", i, n.Name)
		}
		if names[n.Name] {
			return nil, fmt.Errorf("list_command: nodes[%d]: %q is listed twice", i, n.Name)
		}
		names[n.Name] = true
		switch n.State {
		case stateOff, stateBooting, stateOn, stateStopping, stateFailed:
		default:
			return nil, fmt.Errorf("list_command: nodes[%d] (%s): state %q: want off, booting, on, stopping or failed", i, n.Name, n.State)
		}
		if n.Since != "" {
			if _, err := time.Parse(time.RFC3339, n.Since); err != nil {
				return nil, fmt.Errorf("list_command: nodes[%d] (%s): since %q: want an RFC 3339 time", i, n.Name, n.Since)
			}
		}
		if n.Address != "" && !sdk.ValidAddress(n.Address) {
			return nil, fmt.Errorf("list_command: nodes[%d] (%s): address %q: want an IP address or a host name", i, n.Name, n.Address)
		}
	}
	return *ans.Nodes, nil
}

// Describe lists the pool's servers: those booting, on or stopping are
// its instances, and those booting or on its target.
func (c *commands) Describe(ctx context.Context, pool fleet.Pool) (sdk.Group, error) {
	nodes, err := c.list(ctx, pool)
	if err != nil {
		return sdk.Group{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var g sdk.Group
	for _, n := range nodes {
		var state sdk.InstanceState
		switch n.State {
		case stateBooting:
			state = sdk.InstancePending
		case stateOn:
			state = sdk.InstanceRunning
		case stateStopping:
			state = sdk.InstanceTerminating
		default:
			delete(c.seen, seenKey(pool, n.Name)) // powered off: a new launch next time
			continue
		}
		if state != sdk.InstanceTerminating {
			g.Target++
		}
		at, ok := c.seen[seenKey(pool, n.Name)]
		if !ok {
			at = c.now().UTC().Truncate(time.Second)
			c.seen[seenKey(pool, n.Name)] = at
		}
		if n.Since != "" {
			at, _ = time.Parse(time.RFC3339, n.Since) // parseList checked it
		}
		g.Instances = append(g.Instances, sdk.Instance{ID: n.Name, Zone: n.Zone, State: state, LaunchedAt: at, Address: n.Address})
	}
	return g, nil
}

// seenKey is a server's key in commands.seen: its pool's name and its
// own, as pools may name their servers alike (Slurm nodes that two pools
// share).
func seenKey(pool fleet.Pool, name string) string { return pool.Name + "\x00" + name }

// Launch powers on free servers until the servers booting or on reach the
// target: those the request names, where it names any, else in name order.
func (c *commands) Launch(ctx context.Context, pool fleet.Pool, req sdk.LaunchRequest) error {
	c.act.Lock()
	defer c.act.Unlock()
	nodes, err := c.list(ctx, pool)
	if err != nil {
		return err
	}
	active, free := 0, []string{}
	for _, n := range nodes {
		switch n.State {
		case stateBooting, stateOn:
			active++
		case stateOff:
			free = append(free, n.Name)
		}
	}
	need := req.Target - active
	if need <= 0 {
		return nil // done already: a retry, or a restarted controller
	}
	slices.Sort(free)
	pick := make([]string, 0, min(need, len(free)))
	isFree := make(map[string]bool, len(free))
	for _, n := range free {
		isFree[n] = true
	}
	from := free
	if len(req.Names) > 0 {
		from = req.Names
	}
	for _, n := range from {
		if len(pick) == need {
			break
		}
		if isFree[n] {
			pick = append(pick, n)
			isFree[n] = false // picked
		}
	}
	if len(pick) > 0 {
		c.log.Info("powering on", "pool", pool.Name, "servers", pick, "key", req.Key)
		env := []string{"FLEETCAST_LAUNCH_KEY=" + req.Key}
		if _, err := c.run(ctx, "launch_command", c.settings().launch, pool, env, "", pick...); err != nil {
			var ce *commandError
			if errors.As(err, &ce) && ce.exitCode() == tempFail {
				return &sdk.InsufficientCapacityError{Pool: pool.Name, Err: err}
			}
			return err
		}
	}
	if len(pick) < need {
		return &sdk.InsufficientCapacityError{Pool: pool.Name, Granted: len(pick),
			Err: fmt.Errorf("%d server(s) asked for, %d powered off and free%s", need, len(pick), named(req.Names))}
	}
	return nil
}

// named says, for a launch's error, which servers it named, if any.
func named(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " of those named (" + strings.Join(names, ", ") + ")"
}

// Terminate powers off the named servers; those off already are done.
func (c *commands) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	c.act.Lock()
	defer c.act.Unlock()
	nodes, err := c.list(ctx, pool)
	if err != nil {
		return err
	}
	state := map[string]string{}
	for _, n := range nodes {
		state[n.Name] = n.State
	}
	var off []string
	for _, id := range ids {
		switch s, ok := state[id]; {
		case !ok:
			return &sdk.NotFoundError{Pool: pool.Name, Resource: "server " + id, Err: errors.New("list_command does not list it")}
		case s == stateFailed:
			// Set aside (for repair): not the pool's, and left as it is.
			return &sdk.NotFoundError{Pool: pool.Name, Resource: "server " + id, Err: errors.New("list_command lists it failed, out of the pool")}
		case s == stateBooting || s == stateOn:
			off = append(off, id)
		}
	}
	if len(off) == 0 {
		return nil
	}
	c.log.Info("powering off", "pool", pool.Name, "servers", off)
	_, err = c.run(ctx, "terminate_command", c.settings().terminate, pool, nil, "", off...)
	return err
}

// VerifyIdentity runs verify_command with the node's name as its argument
// and the identity document the node presented on its stdin: exit 0
// accepts it, 75 (EX_TEMPFAIL) says it cannot tell now (the node tries
// again), another status refuses it (with the command's stderr).
func (c *commands) VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error {
	argv := c.settings().verify
	if len(argv) == 0 {
		return &sdk.RefusedError{Pool: pool.Name, Err: errors.New("the plugin has no verify_command: its nodes bootstrap with credentials an operator issues")}
	}
	_, err := c.run(ctx, "verify_command", argv, pool, nil, document+"\n", node)
	var ce *commandError
	if errors.As(err, &ce) && ce.exitCode() > 0 && ce.exitCode() != tempFail {
		return &sdk.RefusedError{Pool: pool.Name, Err: err}
	}
	return err // nil, or it could not say (a timeout, a command not there)
}

// configure checks the config block (each command an executable file)
// and each pool's target, and lists each pool once (a listing that fails
// is warned of, not refused: the servers' BMCs may be down a while).
func (c *commands) configure(ctx context.Context, config map[string]any, pools []fleet.Pool, fleetName string) []sdk.Diagnostic {
	var diags []sdk.Diagnostic
	bad := func(path, summary, detail string) {
		diags = append(diags, sdk.Diagnostic{Path: path, Summary: summary, Detail: detail})
	}
	cfg := settings{timeout: defaultTimeout, fleet: fleetName}
	known := map[string]*[]string{"list_command": &cfg.list, "launch_command": &cfg.launch, "terminate_command": &cfg.terminate, "verify_command": &cfg.verify}
	for _, k := range sortedKeys(config) {
		v := config[k]
		if dst, ok := known[k]; ok {
			argv, err := command(v)
			if err != nil {
				bad("config."+k, "Invalid "+k, err.Error())
				continue
			}
			*dst = argv
			continue
		}
		switch k {
		case "timeout":
			s, _ := v.(string)
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > maxTimeout {
				bad("config.timeout", "Invalid timeout", fmt.Sprintf("timeout must be a duration above 0 and at most %s (the controller's deadline for a call is 30s), such as \"20s\".", maxTimeout))
				continue
			}
			cfg.timeout = d
		default:
			bad("config."+k, "Unsupported argument", fmt.Sprintf("An argument named %q is not expected here: the plugin takes list_command, launch_command, terminate_command, verify_command and timeout.", k))
		}
	}
	for _, k := range []string{"list_command", "launch_command", "terminate_command"} {
		if _, ok := config[k]; !ok {
			bad("config", "Missing "+k, k+" is required: the command, as a list (its absolute path, then arguments).")
		}
	}
	for _, p := range pools {
		for _, k := range sortedKeys(sdk.Target(p)) {
			switch sdk.Target(p)[k].(type) {
			case string, float64, bool:
			default:
				bad("pool."+p.Name+".target."+k, "Invalid target attribute", "A target attribute is a string, number or bool: it reaches the commands as FLEETCAST_TARGET_"+strings.ToUpper(k)+".")
			}
			if !envRE.MatchString(k) {
				bad("pool."+p.Name+".target."+k, "Invalid target attribute name", "A target attribute's name is letters, digits and _ (an environment variable's).")
			}
		}
	}
	if len(diags) > 0 {
		return diags
	}
	c.mu.Lock()
	c.cfg = cfg
	c.mu.Unlock()
	// A listing that fails now (a BMC briefly down) is the pool's
	// problem at its next read, not a refused config: warned of only.
	for _, p := range pools {
		if _, err := c.list(ctx, p); err != nil {
			c.log.Warn("list_command fails", "pool", p.Name, "error", err)
		}
	}
	return diags
}

// command checks a command: a list of strings, the first an absolute path.
func command(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New(`a command is a list of strings: its executable, an absolute path, then its arguments, such as ["/etc/fleetcast/racks", "list"].`)
	}
	var argv []string
	for i, a := range list {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is not a string.", i)
		}
		argv = append(argv, s)
	}
	if !filepath.IsAbs(argv[0]) {
		return nil, fmt.Errorf("the executable %q is not an absolute path (the plugin has no PATH of the controller's to look it up in).", argv[0])
	}
	if fi, err := os.Stat(argv[0]); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%s is not an executable file here.", argv[0])
	}
	return argv, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func main() {
	c := &commands{seen: map[string]time.Time{}, now: time.Now, log: sdk.Logger()}
	sdk.Serve(sdk.Plugin{Name: "fleetcast-commands", Version: version, Provider: c, Configure: c.configure})
	c.stop() // the controller stopped the plugin
}
