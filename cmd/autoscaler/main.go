// Command autoscaler is Fleetcast, a predictive autoscaler for cloud GPU
// fleets: the controller and its tools, one subcommand per job. The
// node's agent is its own command, autoscaler-agent (cmd/autoscaler-agent):
// it alone reads NVML and so needs cgo; this one needs neither.
//
//	autoscaler run      -config FILE [-dry-run]               the controller (on a simulated cloud: accelerated)
//	autoscaler plan     -config FILE [-state FILE] [-json]   show what the controller would do now, and why
//	autoscaler simulate -config FILE -trace FILE [-json]      replay a trace under each policy and compare
//	autoscaler forecast -series FILE [-backtest] [-json]      forecast demand, or backtest the models
//	autoscaler history import -config FILE -series FILE       import a demand series into the controller's history
//	autoscaler validate -config FILE [-files] [-json]         check a config file (and the files it names)
//	autoscaler version                                        print the version
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fleetcast/autoscaler/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand.
type command struct {
	name, summary string
	run           func(env *env, args []string) int
}

// env is what a command runs with: its output streams.
type env struct {
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"run", "run the controller: observe, forecast, plan and act every interval", runRun},
		{"plan", "show what the controller would do now, and why (a dry run)", runPlan},
		{"forecast", "forecast a demand series, or backtest the forecasting models on it", runForecast},
		{"history", "import a demand series into the controller's history, so a new controller forecasts from its start", runHistory},
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
			return cli.ExitUsage
		}
		return cli.ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	if args[0] == "agent" {
		// The agent was `autoscaler agent` before it became its own
		// command: say where it went.
		fmt.Fprintln(stderr, "autoscaler: the agent is its own command:", strings.TrimSpace("autoscaler-agent "+strings.Join(args[1:], " ")))
		return cli.ExitUsage
	}
	fmt.Fprintf(stderr, "autoscaler: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return cli.ExitUsage
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

func runVersion(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "version", "version")
	if _, code, ok := cli.Setup(e.stderr, fs, args); !ok {
		return code
	}
	fmt.Fprintln(e.stdout, cli.Version("autoscaler", version))
	return cli.ExitOK
}
