package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
)

// Reporter sends the agent's reports to the controller every Interval and
// at every state change, and carries out the drains the controller answers
// with. The credential is never logged.
type Reporter struct {
	Agent *Agent
	// Controller is the controller's base URL, e.g. https://fleetcast:8790.
	Controller string
	// Credential is the node's credential, renewed by a bootstrap when the
	// controller refuses it.
	Credential *Credential
	Interval   time.Duration
	// RotateEvery rotates the credential once it is this old (by its
	// file's time, so across restarts); 0: never.
	RotateEvery time.Duration
	Client      *http.Client
	Log         hclog.Logger
	// Notify, if set, gets the agent's state for its service manager
	// (systemd's sd_notify protocol: "READY=1", "STATUS=...").
	Notify func(state string)
}

// Run reports until ctx ends. A failed report is retried with exponential
// backoff (1 s doubling to 30 s) and jitter; the drain in progress carries
// on meanwhile.
func (r *Reporter) Run(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	backoff := time.Second
	ready := false
	for {
		changed := r.Agent.Changed()
		wait := interval
		err := r.Send(ctx)
		var refused *RefusedError
		if errors.As(err, &refused) && ctx.Err() == nil {
			// A credential the controller no longer takes: bootstrap
			// again (refused in turn unless the controller allows it).
			if berr := r.Credential.Refused(ctx, refused); berr != nil {
				err = fmt.Errorf("%w; %w", err, berr)
			} else {
				err = r.Send(ctx)
			}
		}
		if ctx.Err() == nil {
			var issued time.Time
			if r.Credential != nil {
				issued = r.Credential.Issued()
			}
			r.Agent.noteReport(r.Controller, r.Agent.cfg.Now(), err, issued)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.Log != nil {
				r.Log.Warn("report failed; retrying", "error", err, "in", backoff)
			}
			r.notify("STATUS=not reporting: " + err.Error())
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, 30*time.Second)
		} else {
			if !ready {
				ready = true
				r.notify("READY=1\nSTATUS=reporting to " + r.Controller)
				if r.Log != nil {
					r.Log.Info("reporting", "controller", r.Controller)
				}
			} else if backoff > time.Second {
				r.notify("STATUS=reporting to " + r.Controller)
			}
			backoff = time.Second
			r.rotate(ctx)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-changed:
			timer.Stop()
		case <-timer.C:
		}
		r.Agent.Tick()
	}
}

// notify tells the service manager; a STATUS= text is one line of at
// most 200 characters (it may quote the controller, which must not add
// assignments such as READY=1).
func (r *Reporter) notify(state string) {
	if r.Notify == nil {
		return
	}
	if head, text, ok := strings.Cut(state, "STATUS="); ok {
		text = strings.Join(strings.Fields(text), " ")
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		state = head + "STATUS=" + text
	}
	r.Notify(state)
}

// rotate rotates the credential when it is RotateEvery old; a failure is
// logged and tried again at the next report.
func (r *Reporter) rotate(ctx context.Context) {
	if r.RotateEvery <= 0 {
		return
	}
	issued := r.Credential.Issued()
	if issued.IsZero() || time.Since(issued) < r.RotateEvery {
		return
	}
	if err := r.Credential.Rotate(ctx); err != nil && r.Log != nil {
		r.Log.Warn("rotating the credential", "error", err)
	}
}

// Send sends one report and applies the controller's answer.
func (r *Reporter) Send(ctx context.Context) error {
	rep := r.Agent.Report()
	body, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	token, err := r.Credential.Token(ctx)
	if err != nil {
		return err
	}
	resp, err := post(ctx, r.Client, r.Controller, rep.Node, "/report", token, body)
	if err != nil {
		return fmt.Errorf("report to %s: %w", r.Controller, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return refusal("report", resp)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer report.Answer
	if err := json.Unmarshal(msg, &answer); err != nil {
		return fmt.Errorf("the controller's answer: %w", err)
	}
	return r.Agent.Drain(answer.Drain)
}
