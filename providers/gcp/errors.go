package gcp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/fleetcast/autoscaler/providers"
)

// Compute Engine's error codes that classify maps to the shared typed
// errors: in an API error's reasons, an operation's errors, or a managed
// instance's last attempt.
var (
	capacityCodes = []string{"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "RESOURCE_POOL_EXHAUSTED", "resourcePoolExhausted", "zoneResourcePoolExhausted"}
	quotaCodes    = []string{"QUOTA_EXCEEDED", "quotaExceeded", "limitExceeded"}
	throttleCodes = []string{"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"}
)

func oneOf(code string, codes []string) bool {
	for _, c := range codes {
		if strings.EqualFold(code, c) {
			return true
		}
	}
	return false
}

// classify maps an error of a call on the pool's group (what names the
// group, call the call) to the shared typed errors: insufficient capacity,
// quota, throttled (429, 503, rate limits), not found (404), refused
// (other 4xx); others are wrapped as they are. nil stays nil.
func classify(pool, what, call string, err error) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("%s %s: %w", call, what, err)
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return fmt.Errorf("pool %s: %w", pool, wrapped)
	}
	reasons := make([]string, 0, len(ge.Errors))
	for _, e := range ge.Errors {
		reasons = append(reasons, e.Reason)
	}
	has := func(codes []string) bool {
		for _, r := range reasons {
			if oneOf(r, codes) {
				return true
			}
		}
		for _, c := range codes {
			if strings.Contains(ge.Message, c) {
				return true
			}
		}
		return false
	}
	switch {
	case has(capacityCodes):
		return &providers.InsufficientCapacityError{Pool: pool, Err: wrapped}
	case has(throttleCodes) || ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusServiceUnavailable:
		return &providers.ThrottledError{Pool: pool, RetryAfter: retryAfter(ge.Header), Err: wrapped}
	case has(quotaCodes):
		return &providers.QuotaExceededError{Pool: pool, Quota: quotaName(ge), Err: wrapped}
	case ge.Code == http.StatusNotFound:
		return &providers.NotFoundError{Pool: pool, Resource: what, Err: wrapped}
	case ge.Code >= 400 && ge.Code < 500:
		return &providers.RefusedError{Pool: pool, Err: wrapped}
	}
	return fmt.Errorf("pool %s: %w", pool, wrapped)
}

// classifyCodes maps the errors an operation or a managed instance's last
// attempt ended with: capacity and quota codes to their typed errors,
// others to a refusal.
func classifyCodes(pool, what, call string, errs []*computepb.Errors) error {
	var texts []string
	kind := ""
	for _, e := range errs {
		texts = append(texts, e.GetCode()+": "+e.GetMessage())
		switch {
		case oneOf(e.GetCode(), capacityCodes):
			kind = "capacity"
		case oneOf(e.GetCode(), quotaCodes) && kind == "":
			kind = "quota"
		}
	}
	err := fmt.Errorf("%s %s: %s", call, what, strings.Join(texts, "; "))
	switch kind {
	case "capacity":
		return &providers.InsufficientCapacityError{Pool: pool, Err: err}
	case "quota":
		return &providers.QuotaExceededError{Pool: pool, Err: err}
	}
	return &providers.RefusedError{Pool: pool, Err: err}
}

// quotaName is the quota an error names, if its details say.
func quotaName(ge *googleapi.Error) string {
	for _, e := range ge.Errors {
		if oneOf(e.Reason, quotaCodes) && e.Message != "" {
			return e.Message
		}
	}
	return ""
}

// retryAfter reads a Retry-After header in seconds; 0 if none.
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if n, err := strconv.Atoi(h.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
