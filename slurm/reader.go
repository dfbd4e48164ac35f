package slurm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Reader reads a cluster through its client commands, as a user of the
// cluster would: `squeue --json` for the queue, `sinfo --json` for the
// nodes. Every read is bounded in time and in output, so a slow or
// failing Slurm makes a read fail, never hang.
type Reader struct {
	// Squeue and Sinfo are the commands (default "squeue" and "sinfo",
	// found on the PATH).
	Squeue, Sinfo string
	// Conf is the cluster's slurm.conf, given to the commands as
	// SLURM_CONF; "" leaves the commands' own default.
	Conf string
	// Timeout bounds each command (default DefaultTimeout); MaxOutput
	// what it may print (default MaxDocument).
	Timeout   time.Duration
	MaxOutput int
}

// DefaultTimeout bounds a command of a read.
const DefaultTimeout = 10 * time.Second

// Snapshot is what one read found.
type Snapshot struct {
	Jobs  []Job
	Nodes []Node
	// Version is the Slurm release that answered; Missing the fields its
	// answers lacked (Decoded.Missing), each once.
	Version string
	Missing []string
}

// Read reads the queue, then the nodes. An error names the command and
// why: it did not start, ran past its timeout, printed more than
// MaxOutput, exited non-zero (with what it said on stderr), or printed
// what is not Slurm's JSON.
func (r *Reader) Read(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	q, err := r.run(ctx, cmp.Or(r.Squeue, "squeue"), "--json")
	if err != nil {
		return s, err
	}
	n, err := r.run(ctx, cmp.Or(r.Sinfo, "sinfo"), "--json")
	if err != nil {
		return s, err
	}
	s.Jobs, s.Nodes, s.Version = q.Jobs, n.Nodes, q.Version
	seen := map[string]bool{}
	for _, m := range append(q.Missing, n.Missing...) {
		if !seen[m] {
			seen[m] = true
			s.Missing = append(s.Missing, m)
		}
	}
	return s, nil
}

// run runs one command and decodes what it printed.
func (r *Reader) run(ctx context.Context, name string, args ...string) (Decoded, error) {
	limit := r.MaxOutput
	if limit <= 0 {
		limit = MaxDocument
	}
	out, err := command{conf: r.Conf, timeout: r.Timeout, limit: limit}.run(ctx, name, args...)
	if err != nil {
		return Decoded{}, err
	}
	what := name + " " + strings.Join(args, " ")
	d, err := Decode(out)
	if err != nil {
		return Decoded{}, fmt.Errorf("%s: %w", what, err)
	}
	if len(d.Errors) > 0 {
		return Decoded{}, fmt.Errorf("%s: Slurm says: %s", what, strings.Join(d.Errors, "; "))
	}
	return d, nil
}

// command is how a client command of the cluster runs: with its
// slurm.conf (SLURM_CONF, unless ""), within timeout (DefaultTimeout when
// 0), printing at most limit bytes.
type command struct {
	conf    string
	timeout time.Duration
	limit   int
}

// run runs name with args and returns what it printed. An error names
// the command and why: it did not start, ran past its timeout, printed
// more than its limit, or exited non-zero (with the first line of what
// it said on stderr).
func (c command) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	timeout := c.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	what := name + " " + strings.Join(args, " ")
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = os.Environ()
	if c.conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+c.conf)
	}
	out := &capped{max: c.limit}
	var stderr capped
	stderr.max = 4 << 10
	cmd.Stdout, cmd.Stderr = out, &stderr
	cmd.WaitDelay = time.Second // a child holding the pipes does not hold the read
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("%s: no answer within %v", what, timeout)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", what, ctx.Err())
	case out.over:
		return nil, fmt.Errorf("%s: printed more than %d bytes", what, c.limit)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if msg := strings.TrimSpace(stderr.buf.String()); msg != "" {
				return nil, fmt.Errorf("%s: exit %d: %s", what, exit.ExitCode(), firstLine(msg))
			}
			return nil, fmt.Errorf("%s: exit %d", what, exit.ExitCode())
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out.buf.Bytes(), nil
}

// firstLine is s up to its first line break, at most 300 bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// capped keeps at most max bytes written to it, and whether more came.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
		return len(p), nil // read on, so the command is not blocked on a full pipe
	}
	return c.buf.Write(p)
}

var _ io.Writer = (*capped)(nil)
