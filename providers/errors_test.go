package providers

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTypedErrors(t *testing.T) {
	cloud := errors.New("InsufficientInstanceCapacity: no p5 capacity")
	tests := []struct {
		err      error
		backOff  bool
		contains string
	}{
		{&InsufficientCapacityError{Pool: "burst", Zone: "us-east-1a", Err: cloud}, true, "pool burst in us-east-1a: insufficient capacity: InsufficientInstanceCapacity"},
		{&QuotaExceededError{Pool: "burst", Quota: "VcpuLimitExceeded", Err: cloud}, true, "pool burst: quota VcpuLimitExceeded exceeded"},
		{&ThrottledError{Pool: "burst", RetryAfter: time.Second, Err: cloud}, false, "pool burst: throttled by the cloud"},
		{&NotFoundError{Pool: "burst", Resource: `auto scaling group "x"`, Err: cloud}, true, `pool burst: auto scaling group "x" not found`},
		{&RefusedError{Pool: "burst", Err: cloud}, true, "pool burst: refused by the cloud"},
	}
	for _, tt := range tests {
		wrapped := fmt.Errorf("launch: %w", tt.err)
		if got := ShouldBackOff(wrapped); got != tt.backOff {
			t.Errorf("ShouldBackOff(%v) = %v", tt.err, got)
		}
		if !errors.Is(wrapped, cloud) {
			t.Errorf("%T does not unwrap to the cloud's error", tt.err)
		}
		if got := tt.err.Error(); len(got) < len(tt.contains) || got[:len(tt.contains)] != tt.contains {
			t.Errorf("Error() = %q, want prefix %q", got, tt.contains)
		}
	}
	var te *ThrottledError
	if !errors.As(fmt.Errorf("x: %w", tests[2].err), &te) || te.RetryAfter != time.Second {
		t.Fatal("errors.As does not find ThrottledError")
	}
}

func TestBackoff(t *testing.T) {
	for failures, want := range map[int]time.Duration{0: 5 * time.Minute, 1: 5 * time.Minute, 2: 10 * time.Minute, 3: 20 * time.Minute, 4: 30 * time.Minute, 50: 30 * time.Minute} {
		if got := Backoff(failures); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", failures, got, want)
		}
	}
}
