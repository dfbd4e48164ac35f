package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/secretfile"
)

// runSlurm is `autoscaler slurm resume|suspend HOSTLIST`: Slurm's
// ResumeProgram and SuspendProgram for pools of Slurm nodes. Each hands
// the hostlist Slurm gives it to the running controller, which decides
// (docs/slurm.md), and exits: it acts on nothing itself.
func runSlurm(e *env, args []string) int {
	if len(args) == 0 || (args[0] != "resume" && args[0] != "suspend") {
		fmt.Fprintln(e.stderr, "slurm: want resume or suspend: autoscaler slurm resume|suspend -addr URL -token-file FILE HOSTLIST")
		return cli.ExitUsage
	}
	program, args := args[0], args[1:]
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "slurm "+program, "slurm "+program+" -addr URL -token-file FILE [-ca-file FILE] HOSTLIST")
	addr := fs.String("addr", "", "the running controller's API URL, such as https://fleetcast.internal:8790")
	tokenFile := fs.String("token-file", "", "file holding an API token of scope demand, mode 0600 (default: FLEETCAST_API_TOKEN)")
	caFile := fs.String("ca-file", "", "PEM file of the CA(s) of the controller's certificate (default: the system's)")
	timeout := cli.Duration{D: 10 * time.Second, Positive: true}
	fs.Var(&timeout, "timeout", "how long the controller may take to answer")
	_, hosts, code, ok := cli.SetupNamed(e.stderr, fs, args, "hostlist")
	if !ok {
		return code
	}
	if *addr == "" {
		fmt.Fprintf(e.stderr, "slurm %s: -addr is required: the controller's API URL\n", program)
		return cli.ExitUsage
	}
	token := os.Getenv("FLEETCAST_API_TOKEN")
	if *tokenFile != "" {
		var err error
		if token, err = secretfile.Read(*tokenFile); err != nil {
			fmt.Fprintf(e.stderr, "slurm %s: the API token: %v\n", program, err)
			return cli.ExitError
		}
	}
	if token == "" {
		fmt.Fprintf(e.stderr, "slurm %s: no API token: give -token-file, a token of scope demand (autoscaler api-token create -scope demand slurm)\n", program)
		return cli.ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout.D)
	defer cancel()
	body, code, err := callControllerAs(ctx, config.Defaults().Controller, *addr, *caFile, token, "POST", "/v1/slurm/"+program, controller.SlurmRequest{Nodes: hosts})
	if err != nil {
		fmt.Fprintf(e.stderr, "slurm %s %s: %v\n", program, hosts, err)
		return code
	}
	var ans controller.SlurmAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(e.stderr, "slurm %s: the controller's answer: %v\n", program, err)
		return cli.ExitError
	}
	fmt.Fprintf(e.stdout, "%s %s: %s\n", program, strings.Join(ans.Nodes, ","), ans.Note)
	return cli.ExitOK
}
