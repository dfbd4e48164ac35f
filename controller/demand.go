package controller

import (
	"cmp"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// DemandPattern is the route of the pending-demand endpoint.
const DemandPattern = "POST /v1/demand"

// DemandPush is what a scheduler sends to POST /v1/demand: the GPUs its
// jobs are waiting for now, per pool, per GPU model, or for any pool. Each
// push replaces the source's previous one.
//
//	{"source": "slurm-prod", "pending": [{"pool": "a100-od", "gpus": 16}, {"gpu_model": "H100", "gpus": 8}, {"gpus": 4}]}
type DemandPush struct {
	// Source names the scheduler (or queue) pushing; pushes from different
	// sources add up.
	Source  string          `json:"source"`
	Pending []PendingDemand `json:"pending"`
}

// PendingDemand is one line of a push: GPUs waiting for a named pool, for
// any pool of a GPU model, or, with neither, for any pool. The planner
// serves a pool's or a model's demand in those pools only.
type PendingDemand struct {
	Pool     string `json:"pool,omitempty"`
	GPUModel string `json:"gpu_model,omitempty"`
	GPUs     int    `json:"gpus"`
}

// maxPendingGPUs bounds one line of a push: more is a mistake, not demand.
const maxPendingGPUs = 1_000_000

// Validate checks a push against the configured pools and names the first
// bad field.
func (d *DemandPush) Validate(pools []fleet.Pool) error {
	if d.Source == "" || len(d.Source) > 128 {
		return errors.New("source: want a name of 1 to 128 characters")
	}
	for i, p := range d.Pending {
		at := fmt.Sprintf("pending[%d]", i)
		switch {
		case p.Pool != "" && p.GPUModel != "":
			return fmt.Errorf("%s: want at most one of pool and gpu_model (neither for any pool)", at)
		case p.GPUs < 0 || p.GPUs > maxPendingGPUs:
			return fmt.Errorf("%s.gpus: %d, want 0 to %d", at, p.GPUs, maxPendingGPUs)
		case p.Pool != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return q.Name == p.Pool }):
			return fmt.Errorf("%s.pool: unknown pool %q", at, p.Pool)
		case p.GPUModel != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return strings.EqualFold(q.GPUModel, p.GPUModel) }):
			return fmt.Errorf("%s.gpu_model: no pool has GPU model %q", at, p.GPUModel)
		}
	}
	return nil
}

// Pending holds the schedulers' latest pushes. A push older than its TTL is
// forgotten: a scheduler that stopped pushing no longer holds capacity up.
// It is safe for concurrent use.
type Pending struct {
	// TTL is how long a push counts (10 minutes when 0).
	TTL time.Duration

	mu       sync.Mutex
	bySource map[string]pushed
}

type pushed struct {
	at   time.Time
	push DemandPush
}

// Set records a source's push at time at, replacing its previous one.
func (p *Pending) Set(at time.Time, d DemandPush) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySource == nil {
		p.bySource = map[string]pushed{}
	}
	d.Pending = slices.Clone(d.Pending)
	p.bySource[d.Source] = pushed{at: at, push: d}
}

// Demand is the pending GPUs of every source whose push is fresh at now,
// and the part of them that waits for a pool or a GPU model, summed by
// scope (GPU models without regard to case), sorted by scope.
func (p *Pending) Demand(now time.Time) (int, []fleet.ScopedDemand) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	byScope := map[fleet.ScopedDemand]int{}
	for src, x := range p.bySource {
		if now.Sub(x.at) > ttl {
			delete(p.bySource, src)
			continue
		}
		for _, l := range x.push.Pending {
			total += l.GPUs
			if l.GPUs > 0 && (l.Pool != "" || l.GPUModel != "") {
				byScope[fleet.ScopedDemand{Pool: l.Pool, GPUModel: strings.ToUpper(l.GPUModel)}] += l.GPUs
			}
		}
	}
	scoped := make([]fleet.ScopedDemand, 0, len(byScope))
	for d, gpus := range byScope {
		d.GPUs = gpus
		scoped = append(scoped, d)
	}
	slices.SortFunc(scoped, func(a, b fleet.ScopedDemand) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), strings.Compare(a.GPUModel, b.GPUModel))
	})
	return total, scoped
}

// DemandReceiver serves POST /v1/demand for schedulers: a bearer token,
// a JSON DemandPush, and every refusal a 4xx with the reason as text that
// changes nothing.
type DemandReceiver struct {
	// Token is the schedulers' shared bearer token (at least 16
	// characters).
	Token   string
	Pools   []fleet.Pool
	Pending *Pending
	// Now is the controller's clock (time.Now when nil).
	Now func() time.Time
	// MaxBytes bounds a push's body (64 KiB when 0).
	MaxBytes int64
	Log      hclog.Logger
}

// ServeHTTP handles one push.
func (dr *DemandReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, reason := dr.receive(w, r)
	if status != http.StatusNoContent {
		if dr.Log != nil {
			dr.Log.Debug("demand push refused", "status", status, "reason", reason)
		}
		http.Error(w, reason, status)
		return
	}
	w.WriteHeader(status)
}

func (dr *DemandReceiver) receive(w http.ResponseWriter, r *http.Request) (int, string) {
	token, ok := report.BearerToken(r)
	if !ok {
		return http.StatusUnauthorized, "missing bearer token"
	}
	if len(dr.Token) < 16 || subtle.ConstantTimeCompare([]byte(token), []byte(dr.Token)) != 1 {
		return http.StatusUnauthorized, "wrong token"
	}
	limit := dr.MaxBytes
	if limit <= 0 {
		limit = 64 << 10
	}
	body, status, reason := report.ReadJSON(w, r, limit, "push")
	if status != http.StatusOK {
		return status, reason
	}
	var push DemandPush
	if err := fleet.DecodeJSON(body, &push); err != nil {
		return http.StatusBadRequest, "demand: " + err.Error()
	}
	if err := push.Validate(dr.Pools); err != nil {
		return http.StatusUnprocessableEntity, "demand: " + err.Error()
	}
	now := time.Now
	if dr.Now != nil {
		now = dr.Now
	}
	dr.Pending.Set(now(), push)
	if dr.Log != nil {
		dr.Log.Debug("demand pushed", "source", push.Source, "lines", len(push.Pending))
	}
	return http.StatusNoContent, ""
}
