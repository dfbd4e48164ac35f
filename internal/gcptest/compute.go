// Package gcptest is a Compute Engine REST API for tests: an httptest
// server that speaks the parts of the API the GCP provider calls, with the
// library's own computepb messages marshalled with protojson, so that the
// clients under test are the real ones (cloud.google.com/go/compute/apiv1,
// reached through option.WithEndpoint). No such server is maintained
// elsewhere.
package gcptest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// LabelFleet is the label the fake's instances carry their fleet in, as
// the provider reads it (gcp.LabelFleet).
const LabelFleet = "fleetcast-fleet"

// Compute is the fake Compute Engine API: managed instance groups (zonal
// and regional), their managed instances, resize and deleteInstances,
// zonal and regional operations, instances, machine types, instance
// templates and reservations. Errors of every kind the provider maps can
// be injected, stockouts set in a group's last attempts, and operations
// made slow. It is safe for concurrent use.
type Compute struct {
	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex
	groups map[string]*Group // by "zones/Z/NAME" or "regions/R/NAME"
	ops    map[string]*computepb.Operation
	// opPolls is how many polls an operation stays RUNNING (slow ones).
	opPolls map[string]int
	// slowOps makes each new operation take this many polls to finish.
	slowOps int
	// fail are errors to answer, by call ("get", "list", "resize",
	// "delete", "instance", "operation", "machineType", "template",
	// "reservation"), each used once, in order.
	fail map[string][]Error
	// requests seen with each request ID, and every call made, in order.
	requestIDs map[string]int
	calls      []string
	// permissions are what each call needs, as Compute Engine checks it.
	permissions []string
	nextID      int
	// machineTypes and templates are by name.
	machineTypes map[string]*computepb.MachineType
	templates    map[string]*computepb.InstanceTemplate
	reservations map[string]*computepb.Reservation
	// key, once ServiceAccountKey made one, is the service account's
	// key: every call then needs an access token the fake's token
	// endpoint issued for an assertion signed with it.
	key    *rsa.PrivateKey
	email  string
	tokens map[string]bool
}

// Error is an error answer: its HTTP code, reason and message, and a
// Retry-After header if set.
type Error struct {
	Code          int
	Reason, Msg   string
	RetryAfterSec int
}

// Group is a managed instance group. Its fields are the fake's: change
// them inside Compute.Do.
type Group struct {
	// Project and Zone (a zonal group) or Region (a regional one) and
	// Name say where it is.
	Project, Zone, Region, Name string
	// Target is its target size.
	Target int32
	// Unstable, with NotReached (an update to a new template, PROACTIVE
	// or OPPORTUNISTIC as UpdatePolicy says) or Recreating
	// (auto-healing), makes the group busy.
	Unstable, NotReached bool
	UpdatePolicy         string
	Recreating           int32
	// Stockout makes the instances it creates fail their last attempt
	// with this code (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED).
	Stockout string
	// Template is the group's instance template's URL.
	Template string
	// Zones are a regional group's zones (its distribution policy); one,
	// REGION-b, if none. TargetShape is its target distribution shape
	// (EVEN, BALANCED, ANY, ANY_SINGLE_ZONE); none if empty.
	Zones       []string
	TargetShape string
	// Labels are set on the instances it creates (as its template would).
	Labels map[string]string

	instances []*instance
}

// instance is a managed instance.
type instance struct {
	name, zone, status, action string
	// id is the VM's numeric ID: a recreate gives the name a new one.
	id      uint64
	created time.Time
	lastErr string
	labels  map[string]string
}

// NewCompute starts a fake Compute Engine API, closed when the test ends.
// It knows the machine types a2-highgpu-8g (8 x A100) and n1-standard-16,
// the global instance templates a100-template, t4-template (N1 with 4 x
// T4), spot-template, reserved-template (on reservation a100-reservation,
// of 4 VMs, 3 in use), open-reserved-template (on open-reservation,
// which any matching VM may use), staging-template (labelling its VMs
// pool gcp-pool's of fleet staging) and other-pool-template (pool
// other's).
func NewCompute(t testing.TB) *Compute {
	f := &Compute{t: t, groups: map[string]*Group{}, ops: map[string]*computepb.Operation{}, opPolls: map[string]int{},
		fail: map[string][]Error{}, requestIDs: map[string]int{}, tokens: map[string]bool{},
		machineTypes: map[string]*computepb.MachineType{
			"a2-highgpu-8g":  {Name: proto.String("a2-highgpu-8g"), Accelerators: []*computepb.Accelerators{{GuestAcceleratorType: proto.String("nvidia-tesla-a100"), GuestAcceleratorCount: proto.Int32(8)}}},
			"n1-standard-16": {Name: proto.String("n1-standard-16")},
		},
		templates: map[string]*computepb.InstanceTemplate{
			"a100-template": {Name: proto.String("a100-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g")}},
			"t4-template": {Name: proto.String("t4-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("n1-standard-16"),
				GuestAccelerators: []*computepb.AcceleratorConfig{{AcceleratorType: proto.String("nvidia-tesla-t4"), AcceleratorCount: proto.Int32(4)}}}},
			"spot-template": {Name: proto.String("spot-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g"),
				Scheduling: &computepb.Scheduling{ProvisioningModel: proto.String("SPOT")}}},
			"reserved-template": {Name: proto.String("reserved-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g"),
				ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("SPECIFIC_RESERVATION"),
					Key: proto.String("compute.googleapis.com/reservation-name"), Values: []string{"a100-reservation"}}}},
			"staging-template": {Name: proto.String("staging-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g"),
				Labels: map[string]string{"fleetcast-managed": "true", "fleetcast-pool": "gcp-pool", LabelFleet: "staging"}}},
			"other-pool-template": {Name: proto.String("other-pool-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g"),
				Labels: map[string]string{"fleetcast-managed": "true", "fleetcast-pool": "other"}}},
			"open-reserved-template": {Name: proto.String("open-reserved-template"), Properties: &computepb.InstanceProperties{MachineType: proto.String("a2-highgpu-8g"),
				ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("SPECIFIC_RESERVATION"),
					Key: proto.String("compute.googleapis.com/reservation-name"), Values: []string{"open-reservation"}}}},
		},
		reservations: map[string]*computepb.Reservation{
			"a100-reservation": {Name: proto.String("a100-reservation"), SpecificReservationRequired: proto.Bool(true),
				SpecificReservation: &computepb.AllocationSpecificSKUReservation{Count: proto.Int64(4), InUseCount: proto.Int64(3)}},
			"open-reservation": {Name: proto.String("open-reservation"), SpecificReservationRequired: proto.Bool(false),
				SpecificReservation: &computepb.AllocationSpecificSKUReservation{Count: proto.Int64(4)}},
		}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the fake's endpoint: a pool's gcp.endpoint.
func (f *Compute) URL() string { return f.srv.URL }

// Options reach the fake with the real clients, unauthenticated.
func (f *Compute) Options() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(f.srv.URL), option.WithoutAuthentication(), option.WithHTTPClient(f.srv.Client())}
}

// ServiceAccountKey writes a service account key file into dir, as the
// IAM API makes one (its token_uri the fake's token endpoint), and from
// then on refuses every call without an access token issued for it: the
// path Application Default Credentials take
// (GOOGLE_APPLICATION_CREDENTIALS).
func (f *Compute) ServiceAccountKey(dir string) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.key, f.email = key, "fleetcast-controller@ml.iam.gserviceaccount.com"
	f.mu.Unlock()
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "ml", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": f.email, "client_id": "1", "token_uri": f.srv.URL + "/token",
	})
	path := filepath.Join(dir, "controller-key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// Do runs fn with the fake locked: to change a group it serves.
func (f *Compute) Do(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// SetSlowOps makes each new operation stay RUNNING for n polls.
func (f *Compute) SetSlowOps(n int) { f.Do(func() { f.slowOps = n }) }

// AddGroup adds a zonal (Zone set) or regional group with running
// instances made at 09:00 on 2026-12-01, of fleet "prod" unless the group
// has labels of its own.
func (f *Compute) AddGroup(g *Group, running int) *Group {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range running {
		f.addInstanceLocked(g, "RUNNING", "NONE", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	}
	g.Target = int32(running)
	f.groups[g.key()] = g
	return g
}

// AddCreating adds an instance the group is creating, its last attempt
// failed with code (none if empty), and raises its target size to match.
func (f *Compute) AddCreating(g *Group, code string) {
	f.Do(func() {
		in := f.addInstanceLocked(g, "", "CREATING", time.Time{})
		in.lastErr = code
		g.Target++
	})
}

func (g *Group) key() string {
	if g.Region != "" {
		return "regions/" + g.Region + "/" + g.Name
	}
	return "zones/" + g.Zone + "/" + g.Name
}

func (f *Compute) addInstanceLocked(g *Group, status, action string, created time.Time) *instance {
	f.nextID++
	zone := g.Zone
	if zone == "" {
		zone = g.Region + "-" + string(rune('a'+f.nextID%3))
	}
	labels := g.Labels
	if labels == nil {
		labels = map[string]string{LabelFleet: "prod"}
	}
	in := &instance{name: fmt.Sprintf("%s-%04d", g.Name, f.nextID), zone: zone, status: status, action: action, created: created, labels: labels,
		id: 7000000000000000000 + uint64(f.nextID)}
	g.instances = append(g.instances, in)
	return in
}

// Recreate recreates the group's instance named name, as autohealing or
// a recreate does: a new VM under the name, with a new ID, made now. It
// returns the new ID.
func (f *Compute) Recreate(g *Group, name string) uint64 {
	var id uint64
	f.Do(func() {
		for _, in := range g.instances {
			if in.name == name {
				f.nextID++
				in.id = 7000000000000000000 + uint64(f.nextID)
				in.created, in.action, in.status = time.Now().UTC().Truncate(time.Second), "NONE", "RUNNING"
				id = in.id
			}
		}
	})
	return id
}

// Boot finishes creating the group's instances: they run, made now; with
// a stockout they stay creating, the error in their last attempt.
func (f *Compute) Boot(g *Group) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range g.instances {
		if in.action == "CREATING" && g.Stockout == "" {
			in.action, in.status, in.created, in.lastErr = "NONE", "RUNNING", time.Now().UTC().Truncate(time.Second), ""
		}
	}
}

// Provision gives the instances the group is creating a VM, provisioning:
// a later attempt got capacity. Their last attempt's error stays, as
// Compute Engine keeps it.
func (f *Compute) Provision(g *Group) {
	f.Do(func() {
		for _, in := range g.instances {
			if in.action == "CREATING" {
				in.status = "PROVISIONING"
			}
		}
	})
}

// Members counts the group's instances by state: running, being created,
// being deleted.
func (f *Compute) Members(g *Group) (running, creating, deleting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range g.instances {
		switch in.action {
		case "CREATING":
			creating++
		case "DELETING":
			deleting++
		default:
			running++
		}
	}
	return running, creating, deleting
}

// FailNext makes the next call of the kind answer with e.
func (f *Compute) FailNext(call string, e Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[call] = append(f.fail[call], e)
}

// Count is how many calls of the kind were made.
func (f *Compute) Count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

// Permissions are the IAM permissions the calls so far needed, in order.
func (f *Compute) Permissions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.permissions...)
}

// token answers the OAuth 2.0 JWT bearer grant (RFC 7523) the Google auth
// library sends for a service account key: an assertion signed with the
// key, for this token endpoint, gets an access token.
func (f *Compute) tokenLocked(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error": "unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	if f.key == nil || !f.verifyLocked(r.Form.Get("assertion")) {
		http.Error(w, `{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}`, http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // never fails
	token := "ya29." + base64.RawURLEncoding.EncodeToString(b)
	f.tokens[token] = true
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 3599, "token_type": "Bearer"}) //nolint:errcheck // a test server
}

// verifyLocked checks an RS256 assertion: signed with the key, issued by
// its service account, for the token endpoint, asking for Compute
// Engine's scope, not expired.
func (f *Compute) verifyLocked(jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&f.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Iss, Aud, Scope string
		Exp             int64
	}
	if json.Unmarshal(payload, &c) != nil {
		return false
	}
	return c.Iss == f.email && c.Aud == f.srv.URL+"/token" && strings.Contains(c.Scope, "https://www.googleapis.com/auth/") &&
		time.Unix(c.Exp, 0).After(time.Now())
}

// serve answers one call, as Compute Engine does.
func (f *Compute) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/token" {
		f.tokenLocked(w, r)
		return
	}
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); f.key != nil && (!ok || !f.tokens[token]) {
		f.errorLocked(w, Error{Code: 401, Reason: "authError", Msg: "Request is missing required authentication credential. Expected OAuth 2 access token."})
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/compute/v1/projects/"), "/")
	// PROJECT / global / kind / NAME, or PROJECT / zones|regions / LOC / kind / NAME [/ verb]
	if len(parts) == 4 && parts[1] == "global" {
		parts = []string{parts[0], "global", "", parts[2], parts[3]}
	}
	if len(parts) < 5 {
		f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: "no such path " + r.URL.Path})
		return
	}
	scope, loc, kind, name := parts[1], parts[2], parts[3], parts[4]
	verb := ""
	if len(parts) > 5 {
		verb = parts[5]
	}
	call := map[string]string{"": "get", "listManagedInstances": "list", "resize": "resize", "deleteInstances": "delete"}[verb]
	switch kind {
	case "operations":
		call = "operation"
	case "instances":
		call = "instance"
	case "machineTypes":
		call = "machineType"
	case "instanceTemplates":
		call = "template"
	case "reservations":
		call = "reservation"
	}
	f.calls = append(f.calls, call)
	f.permissions = append(f.permissions, permission(scope, kind, verb))
	if errs := f.fail[call]; len(errs) > 0 {
		f.fail[call] = errs[1:]
		f.errorLocked(w, errs[0])
		return
	}
	switch kind {
	case "machineTypes", "instanceTemplates", "reservations":
		var m proto.Message
		if mt, ok := f.machineTypes[name]; ok && kind == "machineTypes" {
			m = mt
		} else if t, ok := f.templates[name]; ok && kind == "instanceTemplates" {
			m = t
		} else if r, ok := f.reservations[name]; ok && kind == "reservations" {
			m = r
		}
		if m == nil {
			f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: kind + " " + name})
			return
		}
		f.writeLocked(w, m)
		return
	case "operations":
		op, ok := f.ops[name]
		if !ok {
			f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: "operation " + name})
			return
		}
		if f.opPolls[name] > 0 {
			f.opPolls[name]--
		} else {
			op.Status = computepb.Operation_DONE.Enum()
		}
		f.writeLocked(w, op)
		return
	case "instances":
		for _, g := range f.groups {
			for _, in := range g.instances {
				if in.name == name && in.zone == loc && in.status != "" {
					f.writeLocked(w, &computepb.Instance{Name: proto.String(in.name), Status: proto.String(in.status),
						CreationTimestamp: proto.String(in.created.Format(time.RFC3339)), Labels: in.labels})
					return
				}
			}
		}
		f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: fmt.Sprintf("instance %s in %s", name, loc)})
		return
	}
	g, ok := f.groups[scope+"/"+loc+"/"+name]
	if !ok || kind != "instanceGroupManagers" {
		f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: fmt.Sprintf("The resource 'projects/%s/%s/%s/instanceGroupManagers/%s' was not found", parts[0], scope, loc, name)})
		return
	}
	switch verb {
	case "":
		f.writeLocked(w, g.proto())
	case "listManagedInstances":
		if r.Method != http.MethodPost {
			f.errorLocked(w, Error{Code: 405, Reason: "badRequest", Msg: "listManagedInstances is a POST"})
			return
		}
		out := &computepb.InstanceGroupManagersListManagedInstancesResponse{}
		for _, in := range g.instances {
			mi := &computepb.ManagedInstance{Instance: proto.String(fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/zones/%s/instances/%s", g.Project, in.zone, in.name)),
				CurrentAction: proto.String(in.action), Name: proto.String(in.name), Id: proto.Uint64(in.id)}
			if in.status != "" {
				mi.InstanceStatus = proto.String(in.status)
			}
			if in.lastErr != "" {
				mi.LastAttempt = &computepb.ManagedInstanceLastAttempt{Errors: &computepb.ManagedInstanceLastAttemptErrors{
					Errors: []*computepb.Errors{{Code: proto.String(in.lastErr), Message: proto.String("The zone does not have enough resources available to fulfill the request.")}}}}
			}
			out.ManagedInstances = append(out.ManagedInstances, mi)
		}
		f.writeLocked(w, out)
	case "resize":
		size, err := strconv.Atoi(r.URL.Query().Get("size"))
		if r.Method != http.MethodPost || err != nil {
			f.errorLocked(w, Error{Code: 400, Reason: "invalid", Msg: "resize wants a POST and a size"})
			return
		}
		if op := f.repeatLocked(r); op != nil {
			f.writeLocked(w, op)
			return
		}
		for int(g.live()) < size {
			in := f.addInstanceLocked(g, "", "CREATING", time.Time{})
			if g.Stockout != "" {
				in.lastErr = g.Stockout
			}
		}
		for int(g.live()) > size {
			g.instances[len(g.instances)-1].action = "DELETING"
		}
		g.Target = int32(size)
		f.writeLocked(w, f.newOpLocked(r, g, "resize"))
	case "deleteInstances":
		if op := f.repeatLocked(r); op != nil {
			f.writeLocked(w, op)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req computepb.InstanceGroupManagersDeleteInstancesRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			f.errorLocked(w, Error{Code: 400, Reason: "invalid", Msg: err.Error()})
			return
		}
		for _, url := range req.GetInstances() {
			found := false
			for _, in := range g.instances {
				if strings.HasSuffix(url, "/instances/"+in.name) && in.action != "DELETING" {
					in.action, found = "DELETING", true
					g.Target--
				}
			}
			if !found {
				f.errorLocked(w, Error{Code: 400, Reason: "invalid", Msg: "instance " + url + " is not a member of the group"})
				return
			}
		}
		f.writeLocked(w, f.newOpLocked(r, g, "deleteInstances"))
	default:
		f.errorLocked(w, Error{Code: 404, Reason: "notFound", Msg: "no verb " + verb})
	}
}

// live counts the group's instances not being deleted.
func (g *Group) live() int32 {
	n := int32(0)
	for _, in := range g.instances {
		if in.action != "DELETING" {
			n++
		}
	}
	return n
}

func (g *Group) proto() *computepb.InstanceGroupManager {
	creating := int32(0)
	for _, in := range g.instances {
		if in.action == "CREATING" {
			creating++
		}
	}
	m := &computepb.InstanceGroupManager{Name: proto.String(g.Name), TargetSize: proto.Int32(g.Target),
		CurrentActions: &computepb.InstanceGroupManagerActionsSummary{Creating: proto.Int32(creating), Recreating: proto.Int32(g.Recreating)},
		Status: &computepb.InstanceGroupManagerStatus{IsStable: proto.Bool(!g.Unstable && creating == 0),
			VersionTarget: &computepb.InstanceGroupManagerStatusVersionTarget{IsReached: proto.Bool(!g.NotReached)}}}
	if g.Zone != "" {
		m.Zone = proto.String(g.Zone)
	} else {
		m.Region = proto.String(g.Region)
		zones := g.Zones
		if len(zones) == 0 {
			zones = []string{g.Region + "-b"}
		}
		m.DistributionPolicy = &computepb.DistributionPolicy{}
		if g.TargetShape != "" {
			m.DistributionPolicy.TargetShape = proto.String(g.TargetShape)
		}
		for _, z := range zones {
			m.DistributionPolicy.Zones = append(m.DistributionPolicy.Zones,
				&computepb.DistributionPolicyZoneConfiguration{Zone: proto.String("https://www.googleapis.com/compute/v1/projects/" + g.Project + "/zones/" + z)})
		}
	}
	if g.Template != "" {
		m.InstanceTemplate = proto.String(g.Template)
	}
	if g.UpdatePolicy != "" {
		m.UpdatePolicy = &computepb.InstanceGroupManagerUpdatePolicy{Type: proto.String(g.UpdatePolicy)}
	}
	return m
}

// repeatLocked is the operation already made for the request's ID, if
// any: Compute Engine does a request with the same ID once.
func (f *Compute) repeatLocked(r *http.Request) *computepb.Operation {
	id := r.URL.Query().Get("requestId")
	if id == "" {
		return nil
	}
	f.requestIDs[id]++
	for _, op := range f.ops {
		if op.GetClientOperationId() == id {
			return op
		}
	}
	return nil
}

func (f *Compute) newOpLocked(r *http.Request, g *Group, kind string) *computepb.Operation {
	f.nextID++
	name := fmt.Sprintf("operation-%d", f.nextID)
	op := &computepb.Operation{Name: proto.String(name), OperationType: proto.String(kind), Status: computepb.Operation_RUNNING.Enum(),
		ClientOperationId: proto.String(r.URL.Query().Get("requestId"))}
	if g.Zone != "" {
		op.Zone = proto.String(g.Zone)
	} else {
		op.Region = proto.String(g.Region)
	}
	f.ops[name] = op
	f.opPolls[name] = f.slowOps
	return op
}

func (f *Compute) writeLocked(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		f.t.Errorf("fake compute: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b) //nolint:errcheck // a test server
}

// errorLocked answers as Compute Engine does: a JSON error with its code,
// message and reasons.
func (f *Compute) errorLocked(w http.ResponseWriter, e Error) {
	if e.RetryAfterSec > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfterSec))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{ //nolint:errcheck // a test server
		"code": e.Code, "message": e.Msg, "errors": []map[string]string{{"reason": e.Reason, "message": e.Msg, "domain": "global"}}}})
}

// permission is the IAM permission Compute Engine checks for a call: the
// documented one for each method the provider calls.
func permission(scope, kind, verb string) string {
	switch kind {
	case "instanceGroupManagers":
		if verb == "resize" || verb == "deleteInstances" {
			return "compute.instanceGroupManagers.update"
		}
		return "compute.instanceGroupManagers.get" // get, listManagedInstances
	case "operations":
		if scope == "regions" {
			return "compute.regionOperations.get"
		}
		return "compute.zoneOperations.get"
	case "instanceTemplates":
		return "compute.instanceTemplates.get"
	}
	return "compute." + kind + ".get"
}
