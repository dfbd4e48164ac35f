package gcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// fakeCompute is an httptest server speaking the parts of the Compute
// Engine REST API the provider calls, with the library's own computepb
// messages marshalled with protojson: managed instance groups (zonal and
// regional), their managed instances, resize and deleteInstances, zonal
// and regional operations, and instances. No such server is maintained
// elsewhere; the clients under test are the real ones.
type fakeCompute struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	groups map[string]*fakeGroup // by "zones/Z/NAME" or "regions/R/NAME"
	ops    map[string]*computepb.Operation
	// opPolls is how many polls an operation stays RUNNING (slow ones).
	opPolls map[string]int
	// slowOps makes each new operation take this many polls to finish.
	slowOps int
	// fail are errors to answer, by call ("get", "list", "resize",
	// "delete", "instance"), each used once, in order.
	fail map[string][]fakeError
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
}

// fakeError is an error answer: its HTTP code, reason and message, and a
// Retry-After header if set.
type fakeError struct {
	code          int
	reason, msg   string
	retryAfterSec int
}

// fakeGroup is a managed instance group.
type fakeGroup struct {
	project, zone, region, name string
	target                      int32
	instances                   []*fakeInstance
	// unstable, with notReached (a rolling update) or recreating,
	// makes the group busy.
	unstable, notReached bool
	recreating           int32
	// stockout makes instances it creates fail their last attempt with
	// this code (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED).
	stockout string
	// template is the group's instance template's URL.
	template string
}

// fakeInstance is a managed instance.
type fakeInstance struct {
	name, zone, status, action string
	created                    time.Time
	lastErr                    string
	labels                     map[string]string
}

func newFakeCompute(t *testing.T) *fakeCompute {
	f := &fakeCompute{t: t, groups: map[string]*fakeGroup{}, ops: map[string]*computepb.Operation{}, opPolls: map[string]int{},
		fail: map[string][]fakeError{}, requestIDs: map[string]int{},
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
		},
		reservations: map[string]*computepb.Reservation{
			"a100-reservation": {Name: proto.String("a100-reservation"), SpecificReservationRequired: proto.Bool(true),
				SpecificReservation: &computepb.AllocationSpecificSKUReservation{Count: proto.Int64(4), InUseCount: proto.Int64(3)}},
		}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// options reach the fake with the real clients.
func (f *fakeCompute) options() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(f.srv.URL), option.WithoutAuthentication(), option.WithHTTPClient(f.srv.Client())}
}

// addGroup adds a zonal (zone set) or regional group with running
// instances made an hour ago.
func (f *fakeCompute) addGroup(g *fakeGroup, running int) *fakeGroup {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range running {
		f.addInstanceLocked(g, "RUNNING", "NONE", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	}
	g.target = int32(running)
	f.groups[g.key()] = g
	return g
}

func (g *fakeGroup) key() string {
	if g.region != "" {
		return "regions/" + g.region + "/" + g.name
	}
	return "zones/" + g.zone + "/" + g.name
}

func (f *fakeCompute) addInstanceLocked(g *fakeGroup, status, action string, created time.Time) *fakeInstance {
	f.nextID++
	zone := g.zone
	if zone == "" {
		zone = g.region + "-" + string(rune('a'+f.nextID%3))
	}
	in := &fakeInstance{name: fmt.Sprintf("%s-%04d", g.name, f.nextID), zone: zone, status: status, action: action, created: created,
		labels: map[string]string{LabelFleet: "prod"}}
	g.instances = append(g.instances, in)
	return in
}

// boot finishes creating the group's instances: they run, or with a
// stockout stay creating with the error in their last attempt.
func (f *fakeCompute) boot(g *fakeGroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range g.instances {
		if in.action == "CREATING" && g.stockout == "" {
			in.action, in.status = "NONE", "RUNNING"
		}
	}
}

// failNext makes the next call of the kind answer with e.
func (f *fakeCompute) failNext(call string, e fakeError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[call] = append(f.fail[call], e)
}

// count is how many calls of the kind were made.
func (f *fakeCompute) count(call string) int {
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

func (f *fakeCompute) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/compute/v1/projects/"), "/")
	// PROJECT / global / kind / NAME, or PROJECT / zones|regions / LOC / kind / NAME [/ verb]
	if len(parts) == 4 && parts[1] == "global" {
		parts = []string{parts[0], "global", "", parts[2], parts[3]}
	}
	if len(parts) < 5 {
		f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: "no such path " + r.URL.Path})
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
			f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: kind + " " + name})
			return
		}
		f.writeLocked(w, m)
		return
	case "operations":
		op, ok := f.ops[name]
		if !ok {
			f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: "operation " + name})
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
		f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: fmt.Sprintf("instance %s in %s", name, loc)})
		return
	}
	g, ok := f.groups[scope+"/"+loc+"/"+name]
	if !ok || kind != "instanceGroupManagers" {
		f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: fmt.Sprintf("The resource 'projects/%s/%s/%s/instanceGroupManagers/%s' was not found", parts[0], scope, loc, name)})
		return
	}
	switch verb {
	case "":
		f.writeLocked(w, g.proto())
	case "listManagedInstances":
		if r.Method != http.MethodPost {
			f.errorLocked(w, fakeError{code: 405, reason: "badRequest", msg: "listManagedInstances is a POST"})
			return
		}
		out := &computepb.InstanceGroupManagersListManagedInstancesResponse{}
		for _, in := range g.instances {
			mi := &computepb.ManagedInstance{Instance: proto.String(fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/zones/%s/instances/%s", g.project, in.zone, in.name)),
				CurrentAction: proto.String(in.action), Name: proto.String(in.name)}
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
			f.errorLocked(w, fakeError{code: 400, reason: "invalid", msg: "resize wants a POST and a size"})
			return
		}
		if op := f.repeatLocked(r); op != nil {
			f.writeLocked(w, op)
			return
		}
		for int(g.live()) < size {
			in := f.addInstanceLocked(g, "", "CREATING", time.Time{})
			if g.stockout != "" {
				in.lastErr = g.stockout
			}
		}
		for int(g.live()) > size {
			g.instances[len(g.instances)-1].action = "DELETING"
		}
		g.target = int32(size)
		f.writeLocked(w, f.newOpLocked(r, g, "resize"))
	case "deleteInstances":
		if op := f.repeatLocked(r); op != nil {
			f.writeLocked(w, op)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req computepb.InstanceGroupManagersDeleteInstancesRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			f.errorLocked(w, fakeError{code: 400, reason: "invalid", msg: err.Error()})
			return
		}
		for _, url := range req.GetInstances() {
			found := false
			for _, in := range g.instances {
				if strings.HasSuffix(url, "/instances/"+in.name) && in.action != "DELETING" {
					in.action, found = "DELETING", true
					g.target--
				}
			}
			if !found {
				f.errorLocked(w, fakeError{code: 400, reason: "invalid", msg: "instance " + url + " is not a member of the group"})
				return
			}
		}
		f.writeLocked(w, f.newOpLocked(r, g, "deleteInstances"))
	default:
		f.errorLocked(w, fakeError{code: 404, reason: "notFound", msg: "no verb " + verb})
	}
}

// live counts the group's instances not being deleted.
func (g *fakeGroup) live() int32 {
	n := int32(0)
	for _, in := range g.instances {
		if in.action != "DELETING" {
			n++
		}
	}
	return n
}

func (g *fakeGroup) proto() *computepb.InstanceGroupManager {
	creating := int32(0)
	for _, in := range g.instances {
		if in.action == "CREATING" {
			creating++
		}
	}
	m := &computepb.InstanceGroupManager{Name: proto.String(g.name), TargetSize: proto.Int32(g.target),
		CurrentActions: &computepb.InstanceGroupManagerActionsSummary{Creating: proto.Int32(creating), Recreating: proto.Int32(g.recreating)},
		Status: &computepb.InstanceGroupManagerStatus{IsStable: proto.Bool(!g.unstable && creating == 0),
			VersionTarget: &computepb.InstanceGroupManagerStatusVersionTarget{IsReached: proto.Bool(!g.notReached)}}}
	if g.zone != "" {
		m.Zone = proto.String(g.zone)
	} else {
		m.Region = proto.String(g.region)
		m.DistributionPolicy = &computepb.DistributionPolicy{Zones: []*computepb.DistributionPolicyZoneConfiguration{
			{Zone: proto.String("https://www.googleapis.com/compute/v1/projects/" + g.project + "/zones/" + g.region + "-b")}}}
	}
	if g.template != "" {
		m.InstanceTemplate = proto.String(g.template)
	}
	return m
}

// repeatLocked is the operation already made for the request's ID, if
// any: Compute Engine does a request with the same ID once.
func (f *fakeCompute) repeatLocked(r *http.Request) *computepb.Operation {
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

func (f *fakeCompute) newOpLocked(r *http.Request, g *fakeGroup, kind string) *computepb.Operation {
	f.nextID++
	name := fmt.Sprintf("operation-%d", f.nextID)
	op := &computepb.Operation{Name: proto.String(name), OperationType: proto.String(kind), Status: computepb.Operation_RUNNING.Enum(),
		ClientOperationId: proto.String(r.URL.Query().Get("requestId"))}
	if g.zone != "" {
		op.Zone = proto.String(g.zone)
	} else {
		op.Region = proto.String(g.region)
	}
	f.ops[name] = op
	f.opPolls[name] = f.slowOps
	return op
}

func (f *fakeCompute) writeLocked(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		f.t.Errorf("fake compute: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b) //nolint:errcheck // a test server
}

// errorLocked answers as Compute Engine does: a JSON error with its code,
// message and reasons.
func (f *fakeCompute) errorLocked(w http.ResponseWriter, e fakeError) {
	if e.retryAfterSec > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfterSec))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{ //nolint:errcheck // a test server
		"code": e.code, "message": e.msg, "errors": []map[string]string{{"reason": e.reason, "message": e.msg, "domain": "global"}}}})
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
