package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// refreshBusy lists the statuses of an instance refresh that is not over.
var refreshBusy = []astypes.InstanceRefreshStatus{
	astypes.InstanceRefreshStatusPending, astypes.InstanceRefreshStatusInProgress, astypes.InstanceRefreshStatusCancelling,
	astypes.InstanceRefreshStatusRollbackInProgress, astypes.InstanceRefreshStatusBaking,
}

// busy returns a GroupBusyError while an instance refresh of the group is
// pending or running: scaling then would fight it.
//
// A stand-in for AWS (moto_server, which answers DescribeInstanceRefreshes
// with HTTP 500 and an HTML page) may not implement the call. Such an
// endpoint is asked once: see refreshesUnimplemented for what counts as its
// answer. It is warned about, with what it answered, and not asked again;
// its groups are scaled without the check (it has no instance refreshes to
// fight). Every other failure, and any AWS error such as InternalFailure
// or ServiceUnavailable, is an error: the group is not scaled.
func (p *Provider) busy(ctx context.Context, c *clients, pool fleet.Pool, name string) error {
	p.mu.Lock()
	skip := c.noRefreshes
	p.mu.Unlock()
	if skip {
		return nil
	}
	var ans answer
	out, err := c.asg.DescribeInstanceRefreshes(ctx, &autoscaling.DescribeInstanceRefreshesInput{AutoScalingGroupName: aws.String(name)},
		func(o *autoscaling.Options) { o.APIOptions = append(o.APIOptions, ans.record) })
	if err != nil {
		if !refreshesUnimplemented(c, err) {
			return classify(pool.Name, "DescribeInstanceRefreshes", err)
		}
		p.mu.Lock()
		first := !c.noRefreshes
		c.noRefreshes = true
		p.mu.Unlock()
		if first {
			p.log.Warn("the endpoint does not implement DescribeInstanceRefreshes (its answer is not an AWS error document): its groups are scaled without checking for instance refreshes, and it is not asked again",
				"endpoint", c.endpoint, "pool", pool.Name, "asg", name, "answer", ans.String(), "error", err)
		}
		return nil
	}
	for _, r := range out.InstanceRefreshes {
		if slices.Contains(refreshBusy, r.Status) {
			return &providers.GroupBusyError{Pool: pool.Name,
				Reason: fmt.Sprintf("instance refresh %s of %s is %s", aws.ToString(r.InstanceRefreshId), name, r.Status)}
		}
	}
	return nil
}

// refreshesUnimplemented reports whether err, from DescribeInstanceRefreshes,
// says the endpoint does not implement the call: all of
//
//   - the endpoint is not AWS's own (a pool's endpoint, AWS_ENDPOINT_URL):
//     AWS implements the call, so on AWS any failure is a failure;
//   - the status is 500 or 501, what a server answers for an action it has
//     no handler for (moto's NotImplementedError is a 500); a gateway's
//     502, 503 or 504 is a passing fault, and stays one;
//   - the body is not an AWS error document at all: the SDK could not
//     parse it (an HTML page: a smithy.DeserializationError, with no error
//     code). AWS's own server errors (InternalFailure, ServiceUnavailable)
//     are documents that parse to an API error with its code, and stay
//     errors.
func refreshesUnimplemented(c *clients, err error) bool {
	var (
		re *awshttp.ResponseError
		de *smithy.DeserializationError
	)
	if c.endpoint == "" || !errors.As(err, &re) || !errors.As(err, &de) {
		return false
	}
	status := re.HTTPStatusCode()
	return status == 500 || status == 501
}

// answer keeps what an endpoint answered to a failed call, for a message:
// its status, content type and the start of its body.
type answer struct {
	status      int
	contentType string
	body        []byte
}

// answerBytes is how much of a body an answer keeps.
const answerBytes = 240

// record is client middleware that keeps the raw answer of each attempt
// that failed (the last one wins), leaving the body for the SDK to parse.
func (a *answer) record(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("fleetcastRecordAnswer",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			resp, ok := out.RawResponse.(*smithyhttp.Response)
			if err != nil || !ok || resp.StatusCode < 300 {
				return out, md, err
			}
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if rerr != nil {
				body = append(body, fmt.Sprintf(" (reading the body: %v)", rerr)...)
			}
			a.status, a.contentType, a.body = resp.StatusCode, resp.Header.Get("Content-Type"), body[:min(len(body), answerBytes)]
			return out, md, nil
		}), middleware.After)
}

// String is the answer on one line: "HTTP 500 (text/html): <!doctype ...".
func (a *answer) String() string {
	if a.status == 0 {
		return "none recorded"
	}
	body := strings.Join(strings.Fields(string(bytes.ToValidUTF8(a.body, []byte("?")))), " ")
	ct := a.contentType
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Sprintf("HTTP %d (%s): %q", a.status, ct, body)
}
