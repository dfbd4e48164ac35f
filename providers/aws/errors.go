package aws

import (
	"errors"
	"fmt"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/fleetcast/autoscaler/providers"
)

// Error codes, by what they mean for a pool.
var (
	// capacityCodes: the cloud has no capacity for the request now; the
	// pool backs off and launches fall back to the next pool.
	capacityCodes = map[string]bool{
		"InsufficientInstanceCapacity":         true,
		"InsufficientCapacity":                 true,
		"InsufficientHostCapacity":             true,
		"InsufficientReservedInstanceCapacity": true,
		"InsufficientCapacityOnOutpost":        true,
		"UnfulfillableCapacity":                true,
		"SpotMaxPriceTooLow":                   true,
		"ReservationCapacityExceeded":          true,
		"InsufficientFreeAddressesInSubnet":    true,
		"Unsupported":                          true, // the type is not offered in the zone
	}
	// quotaCodes: an account limit refused it; a person must raise it.
	quotaCodes = map[string]bool{
		"VcpuLimitExceeded":             true,
		"InstanceLimitExceeded":         true,
		"MaxSpotInstanceCountExceeded":  true,
		"LimitExceeded":                 true,
		"ServiceQuotaExceededException": true,
	}
	// throttleCodes: rate limited (the SDK retried with backoff first).
	throttleCodes = map[string]bool{
		"RequestLimitExceeded":      true,
		"Throttling":                true,
		"ThrottlingException":       true,
		"RequestThrottled":          true,
		"TooManyRequests":           true,
		"ResourceContention":        true, // "a pending update to an Auto Scaling resource"
		"ScalingActivityInProgress": true,
	}
	// notFoundCodes: the group, instance or template does not exist.
	notFoundCodes = map[string]bool{
		"InvalidInstanceID.NotFound":                  true,
		"InvalidInstanceID.Malformed":                 true,
		"InvalidLaunchTemplateName.NotFoundException": true,
		"InvalidLaunchTemplateId.NotFound":            true,
		"InvalidLaunchTemplateId.Malformed":           true,
		"InvalidCapacityReservationId.NotFound":       true,
	}
)

// classify turns an AWS error from op on the pool into one of the
// providers package's typed errors where its code fits, keeping AWS's code
// and message; any other error is wrapped with the pool and operation.
func classify(pool, op string, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("pool %s: %s: %w", pool, op, err)
	}
	code, msg := ae.ErrorCode(), ae.ErrorMessage()
	wrapped := fmt.Errorf("%s: %w", op, err)
	switch {
	case capacityCodes[code]:
		return &providers.InsufficientCapacityError{Pool: pool, Err: wrapped}
	case quotaCodes[code]:
		return &providers.QuotaExceededError{Pool: pool, Quota: code, Err: wrapped}
	case throttleCodes[code]:
		return &providers.ThrottledError{Pool: pool, Err: wrapped}
	case notFoundCodes[code],
		code == "ValidationError" && strings.Contains(strings.ToLower(msg), "not found"):
		return &providers.NotFoundError{Pool: pool, Resource: op, Err: err}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		// The request itself was refused (a bad parameter, a missing
		// permission): it will be refused again until someone fixes it.
		return &providers.RefusedError{Pool: pool, Err: wrapped}
	}
	return fmt.Errorf("pool %s: %w", pool, wrapped)
}
