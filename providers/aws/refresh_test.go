package aws

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/providers"
)

// unimplemented is the start of the warning about an endpoint that does not
// implement DescribeInstanceRefreshes.
const unimplemented = "the endpoint does not implement DescribeInstanceRefreshes"

// TestRefreshesUnimplementedByMoto scales groups on moto_server itself,
// which answers DescribeInstanceRefreshes with an HTML 500: the endpoint is
// warned about once, with its answer, and not asked again; its groups
// scale.
func TestRefreshesUnimplementedByMoto(t *testing.T) {
	e := newEnv(t)
	e.proxy.RefreshesFromMoto()
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "g1", lt, "p1", 0, 4, 0)
	e.fix.group(t, "g2", lt, "p2", 0, 4, 0)
	asked := 0
	for i, pool := range []fleet.Pool{e.asgPool("p1", "g1", 4), e.asgPool("p2", "g2", 4)} {
		if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "k-" + pool.Name}); err != nil {
			t.Fatalf("launch in %s on moto: %v", pool.Name, err)
		}
		if d := aws.ToInt32(e.group(t, SettingsOf(pool).ASG).DesiredCapacity); d != 2 {
			t.Fatalf("%s: desired %d after the launch; want 2", SettingsOf(pool).ASG, d)
		}
		n := e.proxy.Count("DescribeInstanceRefreshes")
		switch {
		case i == 0 && n == 0:
			t.Fatal("moto was not asked for instance refreshes")
		case i == 1 && n != asked:
			t.Fatalf("moto asked %d more times for instance refreshes after it answered that it does not implement them", n-asked)
		}
		asked = n
	}
	log := e.log.String()
	if n := strings.Count(log, unimplemented); n != 1 {
		t.Fatalf("warned %d times; want once:\n%s", n, log)
	}
	for _, want := range []string{"endpoint=" + e.proxy.URL, "pool=p1", "HTTP 500 (text/html; charset=utf-8)", "500 Internal Server Error", "StatusCode: 500"} {
		if !strings.Contains(log, want) {
			t.Errorf("the warning lacks %q:\n%s", want, log)
		}
	}
}

// TestRefreshErrorsStayErrors: AWS's own server errors, a gateway's passing
// fault, and anything AWS's own endpoint answers stop the launch, and the
// next launch asks again.
func TestRefreshErrorsStayErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		// f is injected; without one, moto answers.
		f *mototest.Fault
		// onAWS sends the calls to AWS's own endpoint (which the test's
		// HTTP client takes to the proxy).
		onAWS bool
		want  string
	}{
		{name: "AWS InternalFailure", f: &mototest.Fault{Status: 500, Code: "InternalFailure", Message: "An internal error occurred."}, want: "InternalFailure"},
		{name: "AWS ServiceUnavailable", f: &mototest.Fault{Status: 503, Code: "ServiceUnavailable", Message: "Service is unavailable."}, want: "ServiceUnavailable"},
		{name: "a gateway's 502 page", f: &mototest.Fault{Status: 502, Message: "<html><body><h1>502 Bad Gateway</h1></body></html>"}, want: "StatusCode: 502"},
		{name: "an HTML 500 from AWS's own endpoint", onAWS: true, want: "StatusCode: 500"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.fix.group(t, "g", e.fix.template(t, "gpu", "p4d.24xlarge"), "p", 0, 4, 1)
			pool := e.asgPool("p", "g", 4)
			load := []func(*awsconfig.LoadOptions) error{testCreds}
			if tt.onAWS {
				t.Setenv("AWS_ENDPOINT_URL", "")
				t.Setenv("AWS_ENDPOINT_URL_AUTO_SCALING", "")
				t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
				t.Setenv("AWS_CA_BUNDLE", "") // the SDK cannot add it to a plain http.Client
				pool = with(pool, func(s *Settings) { s.Endpoint = "" })
				to, _ := url.Parse(e.proxy.URL)
				load = append(load, awsconfig.WithHTTPClient(&http.Client{Transport: redirect{to}}))
			}
			if tt.f != nil {
				e.proxy.Inject("DescribeInstanceRefreshes", *tt.f)
			} else {
				e.proxy.RefreshesFromMoto()
			}
			// One attempt a call: the SDK's retries of a 5xx are not what
			// is tested here.
			p := New(Options{Now: e.clock.now, MaxAttempts: 1, LoadOptions: load,
				Log: hclog.New(&hclog.LoggerOptions{Output: e.log, Level: hclog.Warn})})
			for try := 1; try <= 2; try++ {
				err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 2, Key: "k"})
				if err == nil || !strings.Contains(err.Error(), "DescribeInstanceRefreshes") || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "pool p") {
					t.Fatalf("launch %d: %v; want an error from DescribeInstanceRefreshes with %q, naming the pool", try, err, tt.want)
				}
				if n := e.proxy.Count("DescribeInstanceRefreshes"); n != try {
					t.Fatalf("launch %d: asked for instance refreshes %d times; want %d (every launch asks)", try, n, try)
				}
			}
			if d := aws.ToInt32(e.group(t, "g").DesiredCapacity); d != 1 {
				t.Fatalf("desired %d; want 1: the group was scaled without knowing of its instance refreshes", d)
			}
			if strings.Contains(e.log.String(), unimplemented) {
				t.Fatalf("taken for an endpoint without instance refreshes:\n%s", e.log)
			}
		})
	}
}

// redirect sends every request to the proxy at to, whatever its host: the
// SDK resolves AWS's own endpoint, and the proxy answers.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}
