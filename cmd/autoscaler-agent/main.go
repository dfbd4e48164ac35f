// Command autoscaler-agent is Fleetcast's agent, run on every node: it
// reads the GPUs through NVML, knows the node's jobs and their
// checkpoints, and reports to the controller; jobs tell it about
// themselves with its register, checkpoint and done commands.
//
//	autoscaler-agent -controller URL -token-file FILE -node NAME   the agent
//	autoscaler-agent register -job ID -gpus 0,1                    a job starts
//	autoscaler-agent checkpoint -job ID                            a job reports a checkpoint
//	autoscaler-agent done -job ID                                  a job ends
//	autoscaler-agent status                                        what the agent knows
//	autoscaler-agent version                                       print the version
//
// It is the only command that needs cgo: NVML's library is loaded at run
// time (dlopen), so one binary runs on machines with and without it. The
// controller's command, autoscaler, is built without cgo.
package main

import (
	"io"
	"os"

	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(agentcmd.Run(newEnv(os.Stdout, os.Stderr), os.Args[1:]))
}

// newEnv is the agent's environment: its output streams, this build's
// version, and the machine's GPUs through NVML's library.
func newEnv(stdout, stderr io.Writer) *agentcmd.Env {
	return &agentcmd.Env{Stdout: stdout, Stderr: stderr, Version: version, OpenGPUs: agentcmd.OpenWith(gpu.OpenSystem)}
}
