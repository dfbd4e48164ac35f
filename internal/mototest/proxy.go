package mototest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy stands in front of moto_server and records every call. It
// answers what moto cannot produce: injected errors (capacity, throttling,
// quota, as AWS sends them, so the SDK's own error parsing and retries
// run), and DescribeInstanceRefreshes, which moto does not implement
// (unless RefreshesFromMoto: then moto answers it, as it does, with an
// HTML 500). Its URL is the endpoint to give the clients.
type Proxy struct {
	*httptest.Server
	mu            sync.Mutex
	calls         []Call
	faults        map[string][]Fault // by action, used in order
	refreshes     map[string]string  // group -> status of its instance refresh
	passRefreshes bool
}

// Call is one call the proxy saw: the signing service, the action and
// the form.
type Call struct {
	Service, Action string
	Form            url.Values
}

// Fault is an error answer: Times is how many calls it answers (0: all).
// It is an AWS error document with Code and Message; without a code, the
// message is the whole body, an HTML page (what a gateway, or a server
// that is not AWS, answers).
type Fault struct {
	Status        int
	Code, Message string
	Times         int
}

// NewProxy starts a proxy in front of the running moto_server (reset to
// empty, as URL does), closed when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	target, _ := url.Parse(URL(t))
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &Proxy{faults: map[string][]Fault{}, refreshes: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		c := Call{Service: service(r), Action: form.Get("Action"), Form: form}
		p.mu.Lock()
		p.calls = append(p.calls, c)
		var f *Fault
		if fs := p.faults[c.Action]; len(fs) > 0 {
			f = &fs[0]
			if f.Times > 0 {
				if f.Times--; f.Times == 0 {
					p.faults[c.Action] = fs[1:]
				}
			}
		}
		var ff Fault
		if f != nil {
			ff = *f
		}
		refresh := p.refreshes[form.Get("AutoScalingGroupName")]
		pass := p.passRefreshes
		p.mu.Unlock()
		switch {
		case f != nil:
			writeError(w, c.Service, ff)
		case c.Action == "DescribeInstanceRefreshes" && !pass:
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

func writeError(w http.ResponseWriter, svc string, f Fault) {
	if f.Code == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(f.Status)
		io.WriteString(w, f.Message) //nolint:errcheck // a test server
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(f.Status)
	if svc == "ec2" {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fault</RequestID></Response>`, f.Code, f.Message)
		return
	}
	fmt.Fprintf(w, `<ErrorResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fault</RequestId></ErrorResponse>`, f.Code, f.Message)
}

func writeRefreshes(w http.ResponseWriter, group, status string) {
	w.Header().Set("Content-Type", "text/xml")
	member := ""
	if status != "" {
		member = fmt.Sprintf(`<member><InstanceRefreshId>refresh-1</InstanceRefreshId><AutoScalingGroupName>%s</AutoScalingGroupName><Status>%s</Status></member>`, group, status)
	}
	fmt.Fprintf(w, `<DescribeInstanceRefreshesResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeInstanceRefreshesResult><InstanceRefreshes>%s</InstanceRefreshes></DescribeInstanceRefreshesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeInstanceRefreshesResponse>`, member)
}

// Inject makes calls of the action answer with f, after the faults
// injected before it are used up.
func (p *Proxy) Inject(action string, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[action] = append(p.faults[action], f)
}

// Clear removes the faults injected for the action.
func (p *Proxy) Clear(action string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.faults, action)
}

// RefreshesFromMoto lets DescribeInstanceRefreshes through to moto, which
// does not implement it.
func (p *Proxy) RefreshesFromMoto() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passRefreshes = true
}

// SetRefresh makes the group's instance refresh have the status
// (InProgress, Successful); "" for none.
func (p *Proxy) SetRefresh(group, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshes[group] = status
}

// Count returns how many calls of an action were made.
func (p *Proxy) Count(action string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.Action == action {
			n++
		}
	}
	return n
}

// Last returns the last call of an action.
func (p *Proxy) Last(action string) (Call, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.calls) - 1; i >= 0; i-- {
		if p.calls[i].Action == action {
			return p.calls[i], true
		}
	}
	return Call{}, false
}

// Actions lists every SERVICE:ACTION called, in order, without repeats.
func (p *Proxy) Actions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, c := range p.calls {
		if !seen[c.Action] {
			seen[c.Action] = true
			out = append(out, c.Service+":"+c.Action)
		}
	}
	return out
}
