package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
)

// runAgentStatus is `autoscaler-agent status`: what the node's agent
// knows (its jobs and their checkpoints, the drain, the GPUs, how its
// reports to the controller go, its credential's age), read over its
// socket.
func runAgentStatus(e *Env, args []string) int {
	fs := cli.NewFlagSet(e.Stderr, Prog, "agent status", "status [-socket PATH] [-json]")
	socket := fs.String("socket", defaultSocket, "the agent's unix socket")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	_, code, ok := cli.Setup(e.Stderr, fs, args)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := agent.Dial(*socket).Status(ctx)
	if err != nil {
		fmt.Fprintf(e.Stderr, "agent status: %v (is the agent running, and may you use %s?)\n", err, *socket)
		return cli.ExitError
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return cli.ExitOK
	}
	printAgentStatus(e.Stdout, s)
	return cli.ExitOK
}

// printAgentStatus writes s for a person: times as ages, by the agent's
// clock (s.At).
func printAgentStatus(w io.Writer, s agent.Status) {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fleet.FormatDuration(s.At.Sub(t)) + " ago"
	}
	l := s.Link
	fmt.Fprintf(w, "node:        %s\n", s.Node)
	switch {
	case l.Controller == "":
		fmt.Fprintln(w, "controller:  not reporting yet")
	case l.LastError != "":
		fmt.Fprintf(w, "controller:  %s: last report %s FAILED: %s (last taken %s)\n", l.Controller, ago(l.LastAttempt), l.LastError, ago(l.LastSuccess))
	default:
		fmt.Fprintf(w, "controller:  %s: last report %s, taken\n", l.Controller, ago(l.LastSuccess))
	}
	fmt.Fprintf(w, "credential:  issued %s\n", ago(l.CredentialIssued))
	if s.Healthy {
		fmt.Fprintf(w, "GPUs:        %d read, %d process(es) no job claims\n", len(s.GPUs), len(s.Unknown))
	} else {
		why := s.GPUError
		if why == "" {
			why = "not read (no GPU data)"
		}
		fmt.Fprintf(w, "GPUs:        cannot be read: %s\n", why)
	}
	drain := string(s.Drain.State)
	if len(s.Drain.Waiting) > 0 {
		drain += "; waiting for " + strings.Join(s.Drain.Waiting, ", ") + " to checkpoint"
	}
	if s.Notice != nil {
		drain += fmt.Sprintf("; the cloud warns of %s", s.Notice.Kind)
	}
	fmt.Fprintf(w, "drain:       %s\n", drain)
	fmt.Fprintf(w, "jobs:        %d\n", len(s.Jobs))
	if len(s.Jobs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  JOB\tGPUS\tPIDS\tSTARTED\tLAST CHECKPOINT\tEXPECTED END")
	for _, j := range s.Jobs {
		end := "-"
		if !j.ExpectedEnd.IsZero() {
			end = "in " + fleet.FormatDuration(j.ExpectedEnd.Sub(s.At))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", j.ID, joinInts(j.GPUs), joinInts(j.PIDs), ago(j.Start), ago(j.LastCheckpoint), end)
	}
	tw.Flush()
}

// joinInts writes ints as 0,1,2; "-" for none.
func joinInts(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ",")
}
