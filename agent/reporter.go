package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
)

// Reporter sends the agent's reports to the controller every Interval and
// at every state change, and carries out the drains the controller answers
// with. The token is never logged.
type Reporter struct {
	Agent *Agent
	// Controller is the controller's base URL, e.g. https://fleetcast:8790.
	Controller string
	Token      string
	Interval   time.Duration
	Client     *http.Client
	Log        hclog.Logger
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
	for {
		changed := r.Agent.Changed()
		wait := interval
		if err := r.Send(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.Log != nil {
				r.Log.Warn("report failed; retrying", "error", err, "in", backoff)
			}
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, 30*time.Second)
		} else {
			backoff = time.Second
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

// Send sends one report and applies the controller's answer.
func (r *Reporter) Send(ctx context.Context) error {
	rep := r.Agent.Report()
	body, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	u := strings.TrimSuffix(r.Controller, "/") + "/v1/agents/" + url.PathEscape(rep.Node) + "/report"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.Token)
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("report to %s: %w", r.Controller, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("report refused with %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var answer report.Answer
	if err := json.Unmarshal(msg, &answer); err != nil {
		return fmt.Errorf("the controller's answer: %w", err)
	}
	return r.Agent.Drain(answer.Drain)
}
