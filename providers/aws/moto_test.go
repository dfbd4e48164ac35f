package aws

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
)

// The tests run against moto_server through internal/mototest.

func TestMain(m *testing.M) {
	code := m.Run()
	mototest.Stop()
	os.Exit(code)
}

// motoURL returns the running moto_server's URL, reset to empty.
func motoURL(t *testing.T) string {
	t.Helper()
	return mototest.URL(t)
}

// proxy stands in front of moto and records every call. It answers what
// moto cannot produce: injected errors (capacity, throttling, quota, as
// AWS sends them, so the SDK's own error parsing and retries run), and
// DescribeInstanceRefreshes, which moto does not implement (unless
// passRefreshes is set: then moto answers it, as it does, with an HTML 500).
type proxy struct {
	*httptest.Server
	mu            sync.Mutex
	calls         []call
	faults        map[string][]fault // by action, used in order
	refreshes     map[string]string  // group -> status of its instance refresh
	passRefreshes bool
}

type call struct {
	service, action string
	form            url.Values
}

// fault is an error answer: times is how many calls it answers (0: all).
// It is an AWS error document with code and message; without a code, the
// message is the whole body, an HTML page (what a gateway, or a server
// that is not AWS, answers).
type fault struct {
	status        int
	code, message string
	times         int
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	target, _ := url.Parse(motoURL(t))
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &proxy{faults: map[string][]fault{}, refreshes: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		c := call{service: service(r), action: form.Get("Action"), form: form}
		p.mu.Lock()
		p.calls = append(p.calls, c)
		var f *fault
		if fs := p.faults[c.action]; len(fs) > 0 {
			f = &fs[0]
			if f.times > 0 {
				if f.times--; f.times == 0 {
					p.faults[c.action] = fs[1:]
				}
			}
		}
		var ff fault
		if f != nil {
			ff = *f
		}
		refresh := p.refreshes[form.Get("AutoScalingGroupName")]
		pass := p.passRefreshes
		p.mu.Unlock()
		switch {
		case f != nil:
			writeError(w, c.service, ff)
		case c.action == "DescribeInstanceRefreshes" && !pass:
			writeRefreshes(w, form.Get("AutoScalingGroupName"), refresh)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// service reads the signing service from the request's Authorization.
func service(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if _, rest, ok := strings.Cut(auth, "Credential="); ok {
		if parts := strings.Split(strings.SplitN(rest, ",", 2)[0], "/"); len(parts) >= 4 {
			return parts[3]
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, svc string, f fault) {
	if f.code == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(f.status)
		io.WriteString(w, f.message)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(f.status)
	if svc == "ec2" {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fault</RequestID></Response>`, f.code, f.message)
		return
	}
	fmt.Fprintf(w, `<ErrorResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fault</RequestId></ErrorResponse>`, f.code, f.message)
}

func writeRefreshes(w http.ResponseWriter, group, status string) {
	w.Header().Set("Content-Type", "text/xml")
	member := ""
	if status != "" {
		member = fmt.Sprintf(`<member><InstanceRefreshId>refresh-1</InstanceRefreshId><AutoScalingGroupName>%s</AutoScalingGroupName><Status>%s</Status></member>`, group, status)
	}
	fmt.Fprintf(w, `<DescribeInstanceRefreshesResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeInstanceRefreshesResult><InstanceRefreshes>%s</InstanceRefreshes></DescribeInstanceRefreshesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeInstanceRefreshesResponse>`, member)
}

func (p *proxy) inject(action string, f fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[action] = append(p.faults[action], f)
}

// refreshesFromMoto lets DescribeInstanceRefreshes through to moto, which
// does not implement it.
func (p *proxy) refreshesFromMoto() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passRefreshes = true
}

func (p *proxy) setRefresh(group, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshes[group] = status
}

// count returns how many calls of an action were made.
func (p *proxy) count(action string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.action == action {
			n++
		}
	}
	return n
}

// last returns the last call of an action.
func (p *proxy) last(action string) (call, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.calls) - 1; i >= 0; i-- {
		if p.calls[i].action == action {
			return p.calls[i], true
		}
	}
	return call{}, false
}

// actions lists every action called, in order, without repeats.
func (p *proxy) actions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, c := range p.calls {
		if !seen[c.action] {
			seen[c.action] = true
			out = append(out, c.service+":"+c.action)
		}
	}
	return out
}

// testCreds are static credentials for the local server.
var testCreds = awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDFLEETCAST", "secret", ""))

// fixture is an account on moto with what Terraform would have made: a
// launch template, and Auto Scaling groups from it.
type fixture struct {
	asg *autoscaling.Client
	ec2 *ec2.Client
	url string
}

const region = "us-east-1"

func newFixture(t *testing.T, endpoint string) *fixture {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(region), testCreds)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		asg: autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		url: endpoint,
	}
}

// template creates a launch template for GPU nodes and returns its name.
func (f *fixture) template(t *testing.T, name, instanceType string) string {
	t.Helper()
	_, err := f.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType(instanceType)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// group creates an Auto Scaling group from a template, tagged as a
// Fleetcast pool, as examples/terraform/aws does.
func (f *fixture) group(t *testing.T, name, template, pool string, minSize, maxSize, desired int32) {
	t.Helper()
	_, err := f.asg.CreateAutoScalingGroup(context.Background(), &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(template), Version: aws.String("$Default")},
		MinSize:              aws.Int32(minSize), MaxSize: aws.Int32(maxSize), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
		Tags: []astypes.Tag{
			{Key: aws.String(TagManaged), Value: aws.String("true"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String(TagPool), Value: aws.String(pool), PropagateAtLaunch: aws.Bool(true)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}
