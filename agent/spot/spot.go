// Package spot watches the EC2 instance metadata service (IMDS) of the
// instance it runs on for the two warnings EC2 gives a spot instance: the
// interruption notice (spot/instance-action, about two minutes before the
// instance is stopped, hibernated or terminated) and the rebalance
// recommendation (events/recommendations/rebalance, an earlier hint that
// the instance is at elevated risk of interruption).
//
// It reads IMDS through the AWS SDK's client
// (github.com/aws/aws-sdk-go-v2/feature/ec2/imds), which fetches and renews
// the IMDSv2 session token itself. One quirk of that client: when it
// cannot reach IMDS to get a token, it falls back to token-less (IMDSv1)
// requests until one is refused with a 401, so where IMDSv2 is required
// the first poll after an outage may fail with a 401 before the next one
// gets a token; Run counts it in the same run of failures.
package spot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
)

// The metadata paths the watcher reads, relative to /latest/meta-data/.
const (
	// InstanceActionPath holds the interruption notice, e.g.
	// {"action":"terminate","time":"2020-01-07T01:03:47Z"}; 404 when none.
	InstanceActionPath = "spot/instance-action"
	// RebalancePath holds the rebalance recommendation, e.g.
	// {"noticeTime":"2020-01-07T01:03:47Z"}; 404 when none.
	RebalancePath = "events/recommendations/rebalance"
)

// DefaultInterval is how often Run polls when Watcher.Interval is not set:
// every 5 seconds, as AWS advises for spot/instance-action.
const DefaultInterval = 5 * time.Second

// same reports whether two notices announce the same thing.
func same(n, o report.Notice) bool {
	return n.Kind == o.Kind && n.Action == o.Action && n.Time.Equal(o.Time)
}

// Watcher polls the metadata service for spot notices: EC2's through
// Client, or another Source. The zero value lacks only a Client; a Watcher holds no state between calls, so one may
// serve several Run and Poll calls at once.
type Watcher struct {
	// Client reads the metadata service, e.g. imds.New(imds.Options{}) on
	// an instance, or with Options.Endpoint set to a mock's address in
	// tests. Its retryer bounds a poll of an unreachable service: with
	// imds.New's defaults (3 attempts, up to 1 s apart) about 4 s.
	Client *imds.Client
	// Interval is how often Run polls; DefaultInterval when zero or less.
	Interval time.Duration
	// Log receives Run's warnings and notices; nil logs nothing.
	Log hclog.Logger
	// Source, when set, is read instead of Client: another cloud's
	// metadata server (GCE).
	Source Source
	// Gone, when set, is called by Run when a kind of notice it delivered
	// is no longer announced (a whole poll answered, without it): an
	// instance stopped or hibernated and resumed, a rebalance
	// recommendation withdrawn.
	Gone func(report.NoticeKind)
}

// Source is a metadata server's notices, read once: what Poll returns.
type Source interface {
	Poll(ctx context.Context) ([]report.Notice, error)
}

// Poll reads both paths once and returns what is announced now: the
// interruption first, then the rebalance recommendation, each only when
// announced (a 404 means nothing is announced; nothing at all is nil, nil).
//
// An error reading or parsing one path does not hide the other: Poll
// returns the notices it could read together with the errors, joined, each
// naming its path. A malformed answer is never a notice.
func (w *Watcher) Poll(ctx context.Context) ([]report.Notice, error) {
	if w.Source != nil {
		return w.Source.Poll(ctx)
	}
	if w.Client == nil {
		return nil, errors.New("spot: Watcher.Client is nil")
	}
	var notices []report.Notice
	var errs []error
	for _, p := range []struct {
		path  string
		parse func([]byte) (report.Notice, error)
	}{
		{InstanceActionPath, parseInstanceAction},
		{RebalancePath, parseRebalance},
	} {
		n, ok, err := w.read(ctx, p.path, p.parse)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			notices = append(notices, n)
		}
	}
	return notices, errors.Join(errs...)
}

// read gets one path and parses it; ok is false when nothing is announced.
func (w *Watcher) read(ctx context.Context, path string, parse func([]byte) (report.Notice, error)) (n report.Notice, ok bool, err error) {
	out, err := w.Client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		if notFound(err) {
			return report.Notice{}, false, nil
		}
		return report.Notice{}, false, fmt.Errorf("%s: %w", path, err)
	}
	defer out.Content.Close()
	body, err := io.ReadAll(out.Content)
	if err != nil {
		return report.Notice{}, false, fmt.Errorf("%s: reading the answer: %w", path, err)
	}
	n, err = parse(body)
	if err != nil {
		return report.Notice{}, false, err
	}
	return n, true, nil
}

// notFound reports whether err is the metadata service's 404. The SDK's
// IMDS client returns any status outside 2xx as a
// *smithyhttp.ResponseError (github.com/aws/smithy-go/transport/http),
// wrapped in a *smithy.OperationError; matching its HTTPStatusCode method
// rather than the concrete type also covers the SDK's own
// *awshttp.ResponseError, which embeds it.
func notFound(err error) bool {
	var status interface{ HTTPStatusCode() int }
	return errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound
}

// Run polls every Interval, first at once, until ctx ends, and calls on
// (on Run's goroutine, so a slow on delays the next poll) for each new
// notice: a notice is delivered once, and again only when it changes
// (another action or deadline) from the last one delivered of its kind. A
// notice that disappears is reported to Gone, and delivered again if it
// comes back.
// A service that recomputes the deadline on every request, as the metadata
// mock does unless given a time, gets a notice each time it moves.
//
// A failed poll (IMDS unreachable, a malformed answer) is logged, as a
// warning only for the first of a run of failures, and polling goes on;
// the notices a partly failed poll did read are still delivered. Run
// returns ctx.Err().
func (w *Watcher) Run(ctx context.Context, on func(report.Notice)) error {
	log := w.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()

	delivered := make(map[report.NoticeKind]report.Notice)
	failed := 0 // polls failed in a row
	for {
		notices, err := w.Poll(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err != nil && failed == 0:
			log.Warn("reading spot notices from the instance metadata service failed; polling on (further failures are logged at debug level until a poll succeeds)", "error", err)
			failed++
		case err != nil:
			failed++
			log.Debug("reading spot notices from the instance metadata service failed again", "failed_polls", failed, "error", err)
		case failed > 0:
			log.Info("the instance metadata service answers again", "failed_polls", failed)
			failed = 0
		}
		for _, n := range notices {
			if last, ok := delivered[n.Kind]; ok && same(last, n) {
				continue
			}
			delivered[n.Kind] = n
			log.Info("spot notice", "kind", n.Kind, "action", n.Action, "deadline", n.Time.Format(time.RFC3339Nano))
			on(n)
		}
		if err == nil {
			for _, k := range []report.NoticeKind{report.Interruption, report.Rebalance} {
				if _, ok := delivered[k]; ok && !slices.ContainsFunc(notices, func(n report.Notice) bool { return n.Kind == k }) {
					delete(delivered, k)
					log.Info("spot notice withdrawn", "kind", k)
					if w.Gone != nil {
						w.Gone(k)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Actions an interruption notice may announce.
var actions = map[string]bool{"terminate": true, "stop": true, "hibernate": true}

const wantAction = `want "terminate", "stop" or "hibernate"`

func parseInstanceAction(body []byte) (report.Notice, error) {
	fields, err := object(InstanceActionPath, body)
	if err != nil {
		return report.Notice{}, err
	}
	action, err := stringField(InstanceActionPath, fields, "action", wantAction)
	if err != nil {
		return report.Notice{}, err
	}
	if !actions[action] {
		return report.Notice{}, fmt.Errorf("%s: action %q: %s", InstanceActionPath, action, wantAction)
	}
	deadline, err := timeField(InstanceActionPath, fields, "time")
	if err != nil {
		return report.Notice{}, err
	}
	return report.Notice{Kind: report.Interruption, Action: action, Time: deadline}, nil
}

func parseRebalance(body []byte) (report.Notice, error) {
	fields, err := object(RebalancePath, body)
	if err != nil {
		return report.Notice{}, err
	}
	notice, err := timeField(RebalancePath, fields, "noticeTime")
	if err != nil {
		return report.Notice{}, err
	}
	return report.Notice{Kind: report.Rebalance, Time: notice}, nil
}

// object parses body as exactly one JSON object. Fields other than the
// ones read are ignored, so that a field AWS adds later breaks nothing.
func object(path string, body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("%s: %s: want a JSON object: %w", path, excerpt(body), err)
	}
	if fields == nil { // the body was null
		return nil, fmt.Errorf("%s: %s: want a JSON object", path, excerpt(body))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: %s: want a single JSON object, with nothing after it", path, excerpt(body))
	}
	return fields, nil
}

// stringField returns the JSON string field name; want says what was
// expected, for the error.
func stringField(path string, fields map[string]json.RawMessage, name, want string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", fmt.Errorf("%s: %s missing: %s", path, name, want)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", fmt.Errorf("%s: %s %s: %s", path, name, jsonExcerpt(raw), want)
	}
	return s, nil
}

const wantTime = "want an RFC 3339 time"

func timeField(path string, fields map[string]json.RawMessage, name string) (time.Time, error) {
	s, err := stringField(path, fields, name, wantTime)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %s %q: %s", path, name, s, wantTime)
	}
	return t, nil
}

// jsonExcerpt shows a field's JSON value, compacted and cut short, for an
// error message.
func jsonExcerpt(raw json.RawMessage) string {
	const max = 64
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return excerpt(raw)
	}
	if b.Len() > max {
		return b.String()[:max] + "..."
	}
	return b.String()
}

// excerpt quotes the start of a malformed answer for an error message.
func excerpt(b []byte) string {
	const max = 64
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
