package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
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
	if math.IsNaN(sum) || math.IsInf(sum, 0) || sum < 0 {
		return 0, p.errorf("answered %v; expected a finite number of GPUs, at least 0", sum)
	}
	if sum > maxPendingGPUs {
		// The bound pushed demand has: more is a mistake (a query over
		// bytes, not GPUs), and would teach the forecast a fleet no
		// limit lets it buy.
		return 0, p.errorf("answered %v; expected at most %d GPUs", sum, maxPendingGPUs)
	}
	return sum, nil
}

func (p *PrometheusDemand) errorf(format string, args ...any) error {
	return fmt.Errorf("prometheus %s, query %q: %w", p.url, p.query, fmt.Errorf(format, args...))
}
