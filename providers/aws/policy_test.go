package aws

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// policy is the least-privilege IAM policy shipped in iam-policy.json.
type policy struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Action    stringOrList
		Resource  stringOrList
		Condition map[string]map[string]string
	}
}

// stringOrList is an IAM field that is a string or a list of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

func readPolicy(t *testing.T) policy {
	t.Helper()
	b, err := os.ReadFile("iam-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		t.Fatalf("iam-policy.json: %v", err)
	}
	return p
}

// allowed reports whether the policy allows an action ("ec2:RunInstances").
func (p policy) allowed(action string) bool {
	for _, s := range p.Statement {
		if s.Effect == "Allow" && slices.Contains(s.Action, action) {
			return true
		}
	}
	return false
}

func readOnly(action string) bool {
	_, name, _ := strings.Cut(action, ":")
	return strings.HasPrefix(name, "Describe") || strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List")
}

// TestPolicyIsLeastPrivilege: no statement allows a changing action on
// every resource, and every changing action on instances or groups is
// conditioned on Fleetcast's ownership tag (or on launching, for tags).
func TestPolicyIsLeastPrivilege(t *testing.T) {
	p := readPolicy(t)
	if p.Version != "2012-10-17" {
		t.Errorf("Version %q", p.Version)
	}
	for _, s := range p.Statement {
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s allows a wildcard action %s", s.Sid, a)
			}
			if readOnly(a) {
				continue
			}
			if slices.Contains(s.Resource, "*") {
				t.Errorf("statement %s allows changing action %s on Resource \"*\"", s.Sid, a)
			}
		}
		if s.Sid == "ScaleOnlyFleetcastGroups" || s.Sid == "TerminateOnlyFleetcastInstances" || s.Sid == "RunOnlyTaggedInstances" {
			cond := s.Condition["StringEquals"]
			if cond["aws:ResourceTag/"+TagManaged] != "true" && cond["aws:RequestTag/"+TagManaged] != "true" {
				t.Errorf("statement %s is not conditioned on %s=true: %v", s.Sid, TagManaged, s.Condition)
			}
		}
	}
}

// TestPolicyCoversCalls: every AWS call in the provider's source, and
// every call a full run of the provider makes against the local server, is
// allowed by the policy.
func TestPolicyCoversCalls(t *testing.T) {
	p := readPolicy(t)
	files, _ := filepath.Glob("*.go")
	call := regexp.MustCompile(`c\.(asg|ec2)\.([A-Z]\w+)\(|(autoscaling|ec2)\.New(\w+)Paginator\(`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			svc, op := m[1], m[2]
			if svc == "" {
				svc, op = m[3], m[4]
			}
			if svc == "asg" {
				svc = "autoscaling"
			}
			seen++
			if !p.allowed(svc + ":" + op) {
				t.Errorf("%s calls %s:%s, which iam-policy.json does not allow", f, svc, op)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d AWS calls in the source: the pattern is stale", seen)
	}

	// The calls a run makes: both pool kinds, every method.
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "g", lt, "p", 0, 4, 1)
	for _, pool := range []fleet.Pool{e.asgPool("p", "g", 4), e.ec2Pool("s", lt, fleet.Spot)} {
		g, err := e.p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: g.Target + 1, Key: "k-" + pool.Name}); err != nil {
			t.Fatal(err)
		}
		g, err = e.p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.p.SetProtected(ctx, pool, []string{g.Instances[0].ID}, true); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Terminate(ctx, pool, []string{g.Instances[0].ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.p.Facts(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.p.SpotPrice(ctx, e.ec2Pool("s", lt, fleet.Spot)); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.proxy.actions() {
		if !p.allowed(a) {
			t.Errorf("the provider called %s, which iam-policy.json does not allow", a)
		}
	}
}
