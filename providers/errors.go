package providers

import (
	"errors"
	"fmt"
	"time"
)

// InsufficientCapacityError means the cloud has no capacity for the pool
// now (e.g. AWS InsufficientInstanceCapacity, GCP
// ZONE_RESOURCE_POOL_EXHAUSTED, an unfulfillable spot request). The planner
// backs the pool off and falls back to the next cheapest pool.
type InsufficientCapacityError struct {
	Pool string
	// Zone is where capacity ran out, if the cloud said.
	Zone string
	// Granted is how many instances of the request the cloud launched
	// before it ran out, where it granted part (EC2 RunInstances with a
	// minimum count below the maximum); 0 otherwise.
	Granted int
	// Err is the cloud's own error.
	Err error
}

func (e *InsufficientCapacityError) Error() string {
	where := e.Pool
	if e.Zone != "" {
		where += " in " + e.Zone
	}
	return fmt.Sprintf("pool %s: insufficient capacity: %v", where, e.Err)
}

// Unwrap returns the cloud's error.
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// QuotaExceededError means an account quota or limit refused the request
// (e.g. AWS VcpuLimitExceeded, GCP QUOTA_EXCEEDED). Like a capacity error it
// backs the pool off, but it needs a person to raise the quota.
type QuotaExceededError struct {
	Pool string
	// Quota names the quota, if the cloud said.
	Quota string
	Err   error
}

func (e *QuotaExceededError) Error() string {
	q := ""
	if e.Quota != "" {
		q = " " + e.Quota
	}
	return fmt.Sprintf("pool %s: quota%s exceeded: %v", e.Pool, q, e.Err)
}

// Unwrap returns the cloud's error.
func (e *QuotaExceededError) Unwrap() error { return e.Err }

// ThrottledError means the cloud rate-limited the call. It is safe to retry
// after RetryAfter (zero if the cloud did not say).
type ThrottledError struct {
	Pool       string
	RetryAfter time.Duration
	Err        error
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("pool %s: throttled by the cloud: %v", e.Pool, e.Err)
}

// Unwrap returns the cloud's error.
func (e *ThrottledError) Unwrap() error { return e.Err }

// NotFoundError means the cloud object or instance does not exist.
type NotFoundError struct {
	Pool string
	// Resource names what was missing, e.g. `auto scaling group "train-burst"`.
	Resource string
	Err      error
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("pool %s: %s not found: %v", e.Pool, e.Resource, e.Err)
}

// Unwrap returns the cloud's error.
func (e *NotFoundError) Unwrap() error { return e.Err }

// GroupBusyError means the group must not be scaled now because the cloud
// is changing it on its own (an Auto Scaling instance refresh). Like a
// capacity error it backs the pool off, and launches go to another pool.
type GroupBusyError struct {
	Pool string
	// Reason says what the cloud is doing, e.g. "instance refresh
	// 0a1b... InProgress".
	Reason string
}

func (e *GroupBusyError) Error() string {
	return fmt.Sprintf("pool %s: the group is busy, not scaled: %s", e.Pool, e.Reason)
}

// RefusedError means the cloud refused the request outright for a reason
// that will not pass by itself (a bad parameter, a missing permission, an
// unsupported instance type): it backs the pool off, so launches go to
// another pool while a person fixes the config or the permissions.
type RefusedError struct {
	Pool string
	Err  error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("pool %s: refused by the cloud: %v", e.Pool, e.Err)
}

// Unwrap returns the cloud's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// ConfigError means the cloud says a pool's config is wrong: what the
// config gives at Attr, a path in the pool's block ("gpus_per_node",
// "capacity", "gcp.mig"), is not what the cloud has (the instance type's
// GPUs, the group's template). A person fixes the config or the cloud; Err
// says what each has, and reads as the whole error.
type ConfigError struct {
	Pool, Attr string
	Err        error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the error that says what each has.
func (e *ConfigError) Unwrap() error { return e.Err }

// NoCredentialsError means the provider found no credentials for its
// cloud where its SDK looks for them (the environment, the shared files,
// the instance's own): a person must set them. It reads as one line that
// says how; the SDK's account of each place it looked is Err.
type NoCredentialsError struct {
	// Cloud names the cloud, e.g. "AWS".
	Cloud string
	// How says how to give it credentials.
	How string
	Err error
}

func (e *NoCredentialsError) Error() string {
	return fmt.Sprintf("no %s credentials found: %s", e.Cloud, e.How)
}

// Unwrap returns the SDK's error.
func (e *NoCredentialsError) Unwrap() error { return e.Err }

// ShouldBackOff reports whether err means the pool cannot get capacity for
// a while, so launches should go to another pool: insufficient capacity,
// an exceeded quota, a group the cloud is busy changing, a refusal, or a
// group or launch template that does not exist.
func ShouldBackOff(err error) bool {
	var ice *InsufficientCapacityError
	var qe *QuotaExceededError
	var busy *GroupBusyError
	var ref *RefusedError
	var nf *NotFoundError
	return errors.As(err, &ice) || errors.As(err, &qe) || errors.As(err, &busy) || errors.As(err, &ref) || errors.As(err, &nf)
}

// OutOfCapacity reports whether err says the cloud has no capacity for
// the pool now: insufficient capacity or an exceeded quota. Of the errors
// ShouldBackOff accepts, these alone say how much a pool can be counted
// on; a busy group or a refusal says nothing of it.
func OutOfCapacity(err error) bool {
	var ice *InsufficientCapacityError
	var qe *QuotaExceededError
	return errors.As(err, &ice) || errors.As(err, &qe)
}

// Backoff is how long a pool is backed off after its failures-th
// consecutive capacity error (1 for the first): 5 minutes, doubling up to
// 30 minutes, as Cluster Autoscaler does for node groups.
func Backoff(failures int) time.Duration {
	const initial, ceiling = 5 * time.Minute, 30 * time.Minute
	d := initial
	for i := 1; i < failures && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}
