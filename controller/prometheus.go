package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// DemandSource reads the GPUs in use from outside the agents.
type DemandSource interface {
	// GPUsInUse returns the GPUs in use at t.
	GPUsInUse(ctx context.Context, t time.Time) (float64, error)
}

// PrometheusDemand is a DemandSource that evaluates a PromQL expression
// (for example over DCGM exporter metrics) on a Prometheus server.
type PrometheusDemand struct {
	api     promv1.API
	url     string
	query   string
	timeout time.Duration
}

// NewPrometheusDemand asks the Prometheus server at url for query, each
// call bounded by timeout.
func NewPrometheusDemand(url, query string, timeout time.Duration) (*PrometheusDemand, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	return &PrometheusDemand{api: promv1.NewAPI(c), url: url, query: query, timeout: timeout}, nil
}

// GPUsInUse evaluates the query at t. A scalar is taken as it is; the
// samples of an instant vector are summed (an empty vector is 0). Any
// other answer, or a value that is not a finite number of 0 to 1,000,000
// GPUs (the bound pushed demand has), is an error naming the server and
// the query.
func (p *PrometheusDemand) GPUsInUse(ctx context.Context, t time.Time) (float64, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	v, warnings, _, err := p.api.Query(ctx, p.query, t)
	if err != nil {
		return 0, p.errorf("%w", err)
	}
	if len(warnings) > 0 {
		// Partial data (a failed shard, say) would read as a dip.
		return 0, p.errorf("answered with warnings: %s", strings.Join(warnings, "; "))
	}
	var sum float64
	switch v := v.(type) {
	case *model.Scalar:
		sum = float64(v.Value)
	case model.Vector:
		for _, s := range v {
			if f := float64(s.Value); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return 0, p.errorf("series %s is %v; expected a finite number of GPUs, at least 0", s.Metric, f)
			}
			sum += float64(s.Value)
		}
	case nil:
		return 0, p.errorf("%w", errors.New("no result"))
	default:
		return 0, p.errorf("answered a %s; expected a scalar or an instant vector", v.Type())
	}
	if err := p.checkSum(sum, ""); err != nil {
		return 0, err
	}
	return sum, nil
}

// checkSum refuses a sum of GPUs that is not a finite number of 0 to
// fleet.MaxDemandGPUs; at, if set, says when it was read.
func (p *PrometheusDemand) checkSum(sum float64, at string) error {
	if math.IsNaN(sum) || math.IsInf(sum, 0) || sum < 0 {
		return p.errorf("answered %v%s; expected a finite number of GPUs, at least 0", sum, at)
	}
	if sum > fleet.MaxDemandGPUs {
		// The bound pushed demand has: more is a mistake (a query over
		// bytes, not GPUs), and would teach the forecast a fleet no
		// limit lets it buy.
		return p.errorf("answered %v%s; expected at most %d GPUs", sum, at, fleet.MaxDemandGPUs)
	}
	return nil
}

// maxRangePoints is the most points a range query asks for: Prometheus
// refuses more than 11,000 a series.
const maxRangePoints = 10_000

// GPUsInUseOver evaluates the query at every step from start to end (a
// range query, /api/v1/query_range), as many queries as it takes to ask
// for at most maxRangePoints points each, each bounded by the timeout. At
// each time the series' samples are summed, as GPUsInUse sums an instant
// vector's; a time at which no series has a sample is left out, not taken
// as 0 (the query's series may not have existed then). An answer with
// warnings, one that is not a range vector, or a sample or a sum that
// GPUsInUse would refuse is an error naming the server, the query and the
// time, and then nothing is returned.
func (p *PrometheusDemand) GPUsInUseOver(ctx context.Context, start, end time.Time, step time.Duration) ([]state.Sample, error) {
	if step <= 0 {
		return nil, p.errorf("range query with step %v; expected a positive step", step)
	}
	var out []state.Sample
	for from := start; !from.After(end); {
		to := from.Add((maxRangePoints - 1) * step)
		if to.After(end) {
			to = end
		}
		part, err := p.rangeQuery(ctx, promv1.Range{Start: from, End: to, Step: step})
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
		from = to.Add(step)
	}
	return out, nil
}

// rangeQuery asks for one range and sums its series at each time.
func (p *PrometheusDemand) rangeQuery(ctx context.Context, r promv1.Range) ([]state.Sample, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	v, warnings, _, err := p.api.QueryRange(ctx, p.query, r)
	if err != nil {
		return nil, p.errorf("range query: %w", err)
	}
	if len(warnings) > 0 {
		return nil, p.errorf("answered the range query with warnings: %s", strings.Join(warnings, "; "))
	}
	m, ok := v.(model.Matrix)
	if !ok {
		if v == nil {
			return nil, p.errorf("range query: %w", errors.New("no result"))
		}
		return nil, p.errorf("answered the range query with a %s; expected a range vector", v.Type())
	}
	sums := map[model.Time]float64{}
	for _, ss := range m {
		for _, x := range ss.Values {
			if f := float64(x.Value); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return nil, p.errorf("series %s is %v at %s; expected a finite number of GPUs, at least 0", ss.Metric, f, x.Timestamp.Time().UTC().Format(time.RFC3339))
			}
			sums[x.Timestamp] += float64(x.Value)
		}
	}
	out := make([]state.Sample, 0, len(sums))
	for _, ts := range slices.Sorted(maps.Keys(sums)) {
		at := ts.Time().UTC()
		if err := p.checkSum(sums[ts], " at "+at.Format(time.RFC3339)); err != nil {
			return nil, err
		}
		out = append(out, state.Sample{Time: at, Value: sums[ts]})
	}
	return out, nil
}

func (p *PrometheusDemand) errorf(format string, args ...any) error {
	return fmt.Errorf("prometheus %s, query %q: %w", p.url, p.query, fmt.Errorf(format, args...))
}
