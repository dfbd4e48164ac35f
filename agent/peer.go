package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Who may do what on the local API. The socket may be open to a group
// (SocketAccess), so the agent, which runs as root to signal jobs, asks
// the kernel who each caller is (SO_PEERCRED) and trusts members of the
// group with their own processes only: a caller other than root or the
// agent's own user registers only processes it owns, and checkpoints,
// ends or re-registers only the jobs it registered; it may not announce
// an interruption (which signals every job). Otherwise a member of the
// group could have the agent signal any process on the node (PID 1, a
// daemon, another user's job), or make another user's busy node look
// idle.

// caller is who made a request of the local API.
type caller struct {
	// uid is the caller's user ID; restricted is set when it is neither
	// root nor the agent's own user, or is unknown on a socket.
	uid        int
	restricted bool
}

// trusted is a caller that may do anything: root, the agent's own user,
// and Go callers of the Agent's methods.
var trusted = caller{uid: 0}

type callerKey struct{}

// ConnContext is the local API server's http.Server.ConnContext: it puts
// the caller of each connection, as the kernel names it, in its requests'
// context. A unix connection whose peer cannot be read is restricted to
// nobody's processes (uid -1).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	uid, err := peerUID(uc)
	if err != nil {
		return context.WithValue(ctx, callerKey{}, caller{uid: -1, restricted: true})
	}
	return context.WithValue(ctx, callerKey{}, caller{uid: uid, restricted: uid != 0 && uid != os.Geteuid()})
}

// callerOf is a request's caller: trusted when the server did not say
// (a handler called directly, in tests).
func callerOf(r *http.Request) caller {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c
	}
	return trusted
}

// NewLocalServer is the HTTP server of the agent's local API: its
// handler, with each caller read from the socket (ConnContext).
func NewLocalServer(a *Agent) *http.Server {
	return &http.Server{Handler: a.Handler(), ConnContext: ConnContext, ReadHeaderTimeout: 5 * time.Second}
}

// ForbiddenError is a request the caller may not make: another user's
// process or job, or an interruption from a user other than root.
type ForbiddenError struct{ Msg string }

func (e *ForbiddenError) Error() string { return e.Msg }

func forbidden(format string, args ...any) error {
	return &ForbiddenError{Msg: fmt.Sprintf(format, args...)}
}

// procOwner is the user ID that owns process pid (its /proc entry).
func procOwner(pid int) (int, error) {
	fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return -1, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, errors.New("no owner in its /proc entry")
	}
	return int(st.Uid), nil
}

// mayUse checks that a restricted caller owns every process in pids.
func (a *Agent) mayUse(c caller, id string, pids []int) error {
	if !c.restricted {
		return nil
	}
	owner := a.cfg.ProcOwner
	if owner == nil {
		owner = procOwner
	}
	for _, p := range pids {
		uid, err := owner(p)
		if err != nil {
			return forbidden("job %s: process %d: its owner cannot be read (%v): register only your own running processes", id, p, err)
		}
		if uid != c.uid {
			return forbidden("job %s: process %d is user %d's, not yours (%d): register only your own processes", id, p, uid, c.uid)
		}
	}
	return nil
}

// mayTouch checks that a restricted caller registered job j.
func mayTouch(c caller, j *job) error {
	if c.restricted && j.owner != c.uid {
		return forbidden("job %s was registered by user %d, not by you (%d)", j.ID, j.owner, c.uid)
	}
	return nil
}
