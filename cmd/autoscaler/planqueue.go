package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
)

// readQueue reads the slurm block's cluster once, as the controller does
// every interval, and adds its demand and its view to st. A read that
// fails is shown in the plan as the controller shows it: the source
// degraded, none of its demand counted.
func readQueue(ctx context.Context, log hclog.Logger, cfg *config.Config, st *fleet.State, now time.Time) error {
	pending := &controller.Pending{Budgeted: fleet.BudgetedTeams(cfg.Teams)}
	src, err := controller.NewSlurmSource(controller.SlurmOptions{Settings: *cfg.Slurm, Pools: cfg.Pools, Pending: pending,
		Now: func() time.Time { return now }, Log: log.Named("slurm")})
	if err != nil {
		return err
	}
	_ = src.Read(ctx) // logged, and in the view
	total, scoped := pending.Demand(now)
	st.PendingGPUs += total
	for _, d := range scoped {
		// One line per scope: the simulated fleet's may have it too.
		at := slices.IndexFunc(st.Scoped, func(s fleet.ScopedDemand) bool { s.GPUs = d.GPUs; return s == d })
		if at < 0 {
			st.Scoped = append(st.Scoped, d)
		} else {
			st.Scoped[at].GPUs += d.GPUs
		}
	}
	st.Queue = src.Queue(now)
	return nil
}

// writeQueue prints the scheduler's view: its pending jobs by partition
// and reason, and whether Fleetcast buys for them; its running jobs; its
// nodes by state.
func writeQueue(w io.Writer, q *fleet.Queue) {
	fmt.Fprintf(w, "  %s", q.Source)
	if q.Version != "" {
		fmt.Fprintf(w, " %s", q.Version)
	}
	if !q.ReadAt.IsZero() {
		fmt.Fprintf(w, ", read at %s", q.ReadAt.UTC().Format("15:04:05"))
	}
	fmt.Fprintln(w, ":")
	if q.Degraded != "" {
		fmt.Fprintf(w, "    degraded:  %s\n", q.Degraded)
	}
	if q.Expired {
		fmt.Fprintln(w, "    expired:   this read is too old to count: none of its demand does")
	}
	if q.ReadAt.IsZero() {
		return
	}
	fmt.Fprintf(w, "    running:   %s, %s\n", jobs(q.RunningJobs), gpus(q.RunningGPUs))
	if len(q.Pending) == 0 {
		fmt.Fprintln(w, "    pending:   no job asks for GPUs")
	} else {
		pw, rw := len("partition"), len("reason")
		for _, l := range q.Pending {
			pw, rw = max(pw, len(l.Partition)), max(rw, len(l.Reason))
		}
		fmt.Fprintf(w, "    pending:   %-*s  %-*s  %4s  %5s\n", pw, "partition", rw, "reason", "jobs", "GPUs")
		for _, l := range q.Pending {
			what := "nothing bought: waits on its reason"
			switch {
			case l.Bought:
				what = fmt.Sprintf("bought for: %s in whole nodes of their shape", gpus(l.DemandGPUs))
			case l.Unserved != "":
				what = "nothing bought: " + l.Unserved
			}
			fmt.Fprintf(w, "               %-*s  %-*s  %4d  %5d  %s\n", pw, l.Partition, rw, l.Reason, l.Jobs, l.GPUs, what)
		}
	}
	if len(q.Nodes) > 0 {
		var parts []string
		for _, n := range q.Nodes {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n.Nodes, n.State, gpus(n.GPUs)))
		}
		fmt.Fprintf(w, "    nodes:     %s\n", strings.Join(parts, ", "))
	}
	if len(q.Missing) > 0 {
		fmt.Fprintf(w, "    missing:   %s (taken as unknown)\n", strings.Join(q.Missing, ", "))
	}
}

// jobs is "1 job" or "N jobs".
func jobs(n int) string {
	if n == 1 {
		return "1 job"
	}
	return fmt.Sprintf("%d jobs", n)
}

// gpus is "1 GPU" or "N GPUs".
func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}
