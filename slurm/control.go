package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/slurm/hostlist"
)

// Control changes a cluster's nodes through `scontrol update`, as an
// operator of the cluster would: it powers cloud nodes up and down,
// drains and resumes them, and tells slurmctld where a node is. Every
// call is bounded in time (Timeout, DefaultTimeout when 0); an error
// names the command and what scontrol said. Its caller needs to be a
// Slurm operator (SlurmUser, root, or AdminLevel=Operator).
type Control struct {
	// Scontrol is the command (default "scontrol", found on the PATH);
	// Scancel the one that signals jobs (default "scancel").
	Scontrol string
	Scancel  string
	// Conf is the cluster's slurm.conf, given as SLURM_CONF; "" leaves
	// the command's own default.
	Conf    string
	Timeout time.Duration
}

// ReasonPrefix begins the reason of every drain Control makes, so that a
// drain of an administrator's (any other reason) is told apart and left
// alone.
const ReasonPrefix = "fleetcast: "

// maxReason bounds a drain's reason: Slurm keeps it for people to read.
const maxReason = 200

// PowerUp asks slurmctld to power the nodes up: it runs its
// ResumeProgram for them, and they take jobs once their slurmd registers.
func (c *Control) PowerUp(ctx context.Context, nodes []string) error {
	return c.update(ctx, nodes, "state=POWER_UP")
}

// PowerDown asks slurmctld to power the nodes down (its SuspendProgram):
// as soon as it can (POWER_DOWN; 22.05 lets a job running there go on,
// the node marked to power down), or, with asap, once their jobs end,
// taking no new one meanwhile (POWER_DOWN_ASAP, which drains a node not
// drained already, with a reason of Slurm's).
func (c *Control) PowerDown(ctx context.Context, nodes []string, asap bool) error {
	if asap {
		return c.update(ctx, nodes, "state=POWER_DOWN_ASAP")
	}
	return c.update(ctx, nodes, "state=POWER_DOWN")
}

// PowerDownForce powers the nodes down at once, a power-up under way
// included (POWER_DOWN_FORCE): without it, 22.05 only marks a node
// powering up to power down, and marks it DOWN at ResumeTimeout if no
// slurmd registers. It requeues the jobs on them: only for nodes with
// none.
func (c *Control) PowerDownForce(ctx context.Context, nodes []string) error {
	return c.update(ctx, nodes, "state=POWER_DOWN_FORCE")
}

// Drain drains the nodes: they take no new job, and those running go on.
// The reason is kept after ReasonPrefix ("fleetcast: scale-in"), which
// says the drain is Fleetcast's.
func (c *Control) Drain(ctx context.Context, nodes []string, reason string) error {
	reason = strings.Map(func(r rune) rune {
		if r == '"' || r < ' ' {
			return ' '
		}
		return r
	}, reason)
	if reason = strings.TrimSpace(reason); reason == "" || len(reason) > maxReason {
		return fmt.Errorf("drain: a reason of 1 to %d characters, got %d", maxReason, len(reason))
	}
	return c.update(ctx, nodes, "state=DRAIN", "reason="+ReasonPrefix+reason)
}

// Resume ends a drain of the nodes: they take jobs again.
func (c *Control) Resume(ctx context.Context, nodes []string) error {
	return c.update(ctx, nodes, "state=RESUME")
}

// SetAddress tells slurmctld the address (and host name, if not "") of a
// cloud node, as the instance it runs on has: slurmctld and the other
// nodes reach its slurmd there.
func (c *Control) SetAddress(ctx context.Context, node, addr, hostname string) error {
	if addr == "" {
		return errors.New("set address: no address")
	}
	args := []string{"nodeaddr=" + addr}
	if hostname != "" {
		args = append(args, "nodehostname="+hostname)
	}
	return c.update(ctx, []string{node}, args...)
}

// Signal sends the batch scripts of the jobs (IDs, array tasks' own) the
// signal (a name: "USR1"), through `scancel --signal=SIG --batch`: asked
// to checkpoint, a job saves its state and ends (or requeues itself).
// Steps the script started are not signalled; the script passes it on.
func (c *Control) Signal(ctx context.Context, jobs []string, signal string) error {
	if signal == "" || strings.ContainsFunc(signal, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '0' || r > '9') }) {
		return fmt.Errorf("scancel: signal %q: want a signal's name", signal)
	}
	if len(jobs) == 0 {
		return errors.New("scancel: no job")
	}
	for _, j := range jobs {
		if j == "" || strings.ContainsFunc(j, func(r rune) bool { return (r < '0' || r > '9') && r != '_' }) {
			return fmt.Errorf("scancel: job %q: want a job's ID", j)
		}
	}
	argv := append([]string{"--signal=" + signal, "--batch"}, jobs...)
	_, err := command{conf: c.Conf, timeout: c.Timeout, limit: 64 << 10}.run(ctx, cmp.Or(c.Scancel, "scancel"), argv...)
	return err
}

// update runs `scontrol update nodename=HOSTLIST ARGS...`.
func (c *Control) update(ctx context.Context, nodes []string, args ...string) error {
	for _, n := range nodes {
		if n == "" || strings.ContainsAny(n, "[],= \t\n") {
			return fmt.Errorf("scontrol update: node name %q: want a node's name", n)
		}
	}
	if len(nodes) == 0 {
		return errors.New("scontrol update: no node")
	}
	argv := append([]string{"update", "nodename=" + hostlist.Compress(nodes)}, args...)
	_, err := command{conf: c.Conf, timeout: c.Timeout, limit: 64 << 10}.run(ctx, cmp.Or(c.Scontrol, "scontrol"), argv...)
	return err
}
