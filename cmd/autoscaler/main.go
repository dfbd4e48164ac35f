// Command autoscaler is Fleetcast, a predictive autoscaler for cloud GPU
// fleets: one binary with a subcommand per job.
//
//	autoscaler run      -config FILE [-dry-run]               the controller (on a simulated cloud: accelerated)
//	autoscaler plan     -config FILE [-state FILE] [-json]   show what the controller would do now, and why
//	autoscaler simulate -config FILE -trace FILE [-json]      replay a trace under each policy and compare
//	autoscaler forecast -series FILE [-backtest] [-json]      forecast demand, or backtest the models
//	autoscaler history import -config FILE -series FILE       import a demand series into the controller's history
//	autoscaler agent -controller URL -token-file FILE         the in-instance agent
//	autoscaler agent checkpoint -job ID                       a job reports a checkpoint
//	autoscaler validate -config FILE [-files] [-json]         check a config file (and the files it names)
//	autoscaler version                                        print the version
package main

import (
	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/fleet"

	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command failed: bad config, bad state, a cloud error
	exitUsage = 2 // the command line was wrong
)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(env *env, args []string) int
}

// env is what a command runs with: its output streams, and the machine's
// GPUs for the agent.
type env struct {
	stdout, stderr io.Writer
	// openGPUs opens the GPUs' NVML (gpu.OpenSystem when nil; tests give
	// go-nvml's mock machines).
	openGPUs func() (*gpu.Reader, error)
}

func commands() []command {
	return []command{
		{"run", "run the controller: observe, forecast, plan and act every interval", runRun},
		{"plan", "show what the controller would do now, and why (a dry run)", runPlan},
		{"forecast", "forecast a demand series, or backtest the forecasting models on it", runForecast},
		{"history", "import a demand series into the controller's history, so a new controller forecasts from its start", runHistory},
		{"agent", "run the in-instance agent, or tell it about a job (register, checkpoint, done)", runAgent},
		{"state", "export the controller's state to a file (a backup), or import one into a new state: between a state file and etcd", runState},
		{"report", "who used what: cost, GPU-hours and queue times by team, tier, pool or job, from the running controller or its state", runReport},
		{"simulate", "replay a workload trace through static, reactive, headroom, predictive and oracle fleets, or draw the cost-against-waiting frontier", runSimulate},
		{"token", "list, issue or revoke node credentials on the running controller", runToken},
		{"api-token", "create, list, rotate or revoke API tokens (scopes demand, read, operator) on the running controller", runAPIToken},
		{"plugins", "list the provider plugins, their versions and health (from the running controller, or by starting each)", runPlugins},
		{"slurm", "Slurm's resume and suspend programs for pools of Slurm nodes: hand a hostlist to the running controller", runSlurm},
		{"validate", "check a fleet config file", runValidate},
		{"version", "print the version", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(&env{stdout: stdout, stderr: stderr}, args)
}

// runEnv runs the command line args in e.
func runEnv(e *env, args []string) int {
	stderr := e.stderr
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "autoscaler: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return exitUsage
}

// printUsage prints the commands.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: autoscaler COMMAND [flags]")
	fmt.Fprintln(w, "\nFleetcast, a predictive autoscaler for cloud GPU fleets.\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'autoscaler COMMAND -h' for a command's flags.")
}

// setup adds the logging flags every command takes (-log-level,
// -log-json) to fs, parses args and makes the command's logger, writing to
// stderr. When ok is false the command stops with the exit status code:
// help was asked for, or the command line is wrong.
func setup(e *env, fs *flag.FlagSet, args []string) (log hclog.Logger, code int, ok bool) {
	log, _, code, ok = setupNamed(e, fs, args, "")
	return log, code, ok
}

// setupNamed is setup for a command that takes one name (a node, a
// token) besides its flags, first or last: `token issue NODE -config F`
// or `token issue -config F NODE`. what says what the name is, for the
// error when it is missing; "" takes none.
func setupNamed(e *env, fs *flag.FlagSet, args []string, what string) (log hclog.Logger, name string, code int, ok bool) {
	level := fs.String("log-level", "warn", "log level: trace, debug, info, warn or error")
	asJSON := fs.Bool("log-json", false, "write logs as JSON lines")
	if what != "" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, "", exitOK, false
	case err != nil:
		return nil, "", exitUsage, false
	case what != "" && name == "" && fs.NArg() == 1:
		name = fs.Arg(0)
	case fs.NArg() > 0:
		fmt.Fprintf(e.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return nil, "", exitUsage, false
	}
	if what != "" && name == "" {
		config := ""
		if fs.Lookup("config") != nil {
			config = " -config FILE"
		}
		fmt.Fprintf(e.stderr, "%s: name the %s: %s%s %s\n", fs.Name(), what, fs.Name(), config, strings.ToUpper(what))
		return nil, "", exitUsage, false
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintf(e.stderr, "%s: -log-level %q: want trace, debug, info, warn or error\n", fs.Name(), *level)
		return nil, "", exitUsage, false
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "autoscaler",
		Level:      lvl,
		JSONFormat: *asJSON,
		Output:     e.stderr,
	}), name, exitOK, true
}

// durationFlag is a flag holding a duration in the config's syntax
// ("90s", "10m", "14d"), never negative, and positive when it must be.
type durationFlag struct {
	d        time.Duration
	positive bool
	set      bool // given on the command line, 0 included
}

func (f *durationFlag) String() string {
	if f == nil || f.d == 0 {
		return ""
	}
	return fleet.FormatDuration(f.d)
}

func (f *durationFlag) Set(s string) error {
	d, err := fleet.ParseDuration(s)
	switch {
	case err != nil, d < 0, f.positive && d == 0:
		return fmt.Errorf("want a duration such as 10m, 1h30m or 14d")
	}
	f.d, f.set = d, true
	return nil
}

func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: autoscaler %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func runVersion(e *env, args []string) int {
	fs := newFlagSet(e, "version", "version")
	if _, code, ok := setup(e, fs, args); !ok {
		return code
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Fprintf(e.stdout, "autoscaler %s (%s, %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
