package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
)

// oneGPU is a node's GPUs as NVML would read them: one GPU, running the
// job's process.
type oneGPU struct{ pid int }

func (g oneGPU) Read() ([]report.GPU, error) {
	return []report.GPU{{Index: 0, UUID: "GPU-0", MemoryTotal: 80 << 30, Processes: []report.Process{{PID: g.pid, GPU: 0}}}}, nil
}

// skewedNode is one node of the clock test: a real agent whose clock is
// off the controller's by a fixed offset, and the one job it runs, with
// what really happened to the job in true (the controller's) time.
type skewedNode struct {
	id    string
	off   time.Duration
	a     *agent.Agent
	every time.Duration // the job checkpoints on its own this often
	// answer is how long the job takes to checkpoint when signalled; < 0:
	// it ignores the signal.
	answer   time.Duration
	exitAt   time.Time // zero: runs on
	nextCkpt time.Time
	due      []time.Time // checkpoints asked for by a signal
	// In true time: the job's last checkpoint, and when the agent
	// received each drain.
	lastCkpt time.Time
	received map[string]time.Time
	gone     bool
}

// inFlight is a report on its way to the controller.
type inFlight struct {
	at   time.Time // delivery
	node *skewedNode
	body []byte
}

// TestDrainNeverBeatsTheAgentsConfirmation is generated: agents with
// clocks off the controller's by up to 4 minutes either way, reports
// delivered up to 90 s late and out of order, jobs that checkpoint on
// their own schedule, answer a drain's signal late, never, or exit. Every
// termination the controller decides must be of a node whose job, in true
// time, checkpointed after its agent received the drain, or exited.
func TestDrainNeverBeatsTheAgentsConfirmation(t *testing.T) {
	cases := 60
	if testing.Short() {
		cases = 20
	}
	terminated := 0
	for seed := range cases {
		terminated += drainClockCase(t, uint64(seed))
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	if terminated < cases/2 {
		t.Fatalf("only %d terminations in %d cases: the test exercises too little", terminated, cases)
	}
}

func drainClockCase(t *testing.T, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 14))
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	l.set.Limits.ScaleInShare = 1
	tokens := nodeauthtest.New(t)
	api := l.c.Handler(APIOptions{Credentials: tokens})
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 4); err != nil {
		t.Fatal(err)
	}
	g, err := l.cloud.Describe(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	drawn := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var nodes []*skewedNode
	for i, in := range g.Instances {
		n := &skewedNode{id: in.ID, off: drawn(-4*time.Minute, 4*time.Minute), every: drawn(3*time.Minute, 25*time.Minute),
			answer: drawn(0, 15*time.Minute), received: map[string]time.Time{}}
		if rng.IntN(5) == 0 {
			n.answer = -1
		}
		if rng.IntN(6) == 0 {
			n.exitAt = l.now.Add(drawn(10*time.Minute, 50*time.Minute))
		}
		// A PID no process can have (above the kernel's pid_max, at most
		// 2^22): the agent reads its start time in /proc, and a real
		// process under the number exiting or starting would look like
		// the job exiting, which only the test's clock may decide.
		pid := 1<<30 + i
		n.a, err = agent.New(agent.Config{Node: in.ID, GPUs: oneGPU{pid}, Now: func() time.Time { return l.now.Add(n.off) },
			Signal: func(_ int, sig syscall.Signal) error {
				if !n.exitAt.IsZero() && !l.now.Before(n.exitAt) {
					return syscall.ESRCH
				}
				if sig != 0 && n.answer >= 0 {
					n.due = append(n.due, l.now.Add(n.answer))
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.a.Register("train", []int{0}, []int{pid}); err != nil {
			t.Fatal(err)
		}
		n.nextCkpt = l.now.Add(drawn(0, n.every))
		nodes = append(nodes, n)
	}
	var queue []inFlight
	deliver := func(f inFlight) {
		req := httptest.NewRequest(http.MethodPost, "/v1/agents/"+f.node.id+"/report", bytes.NewReader(f.body))
		req.Header.Set("Authorization", "Bearer "+tokens.For(f.node.id))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("seed %d: report from %s refused: %d %s", seed, f.node.id, w.Code, w.Body)
		}
		var ans report.Answer
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
			t.Fatal(err)
		}
		if d := ans.Drain; d != nil {
			if _, ok := f.node.received[d.ID]; !ok {
				f.node.received[d.ID] = l.now
			}
		}
		if err := f.node.a.Drain(ans.Drain); err != nil {
			t.Fatalf("seed %d: drain answer to %s: %v", seed, f.node.id, err)
		}
	}
	terminations := 0
	nextCycle := l.now.Add(time.Minute)
	for end := l.now.Add(90 * time.Minute); l.now.Before(end); {
		l.now = l.now.Add(drawn(5*time.Second, 30*time.Second))
		for _, n := range nodes {
			if n.gone {
				continue
			}
			exited := !n.exitAt.IsZero() && !l.now.Before(n.exitAt)
			if !exited && !l.now.Before(n.nextCkpt) {
				n.nextCkpt = l.now.Add(n.every)
				n.checkpoint(t, l.now)
			}
			for len(n.due) > 0 && !exited && !l.now.Before(n.due[0]) {
				n.due = n.due[1:]
				n.checkpoint(t, l.now)
			}
			n.a.Tick()
			body, err := json.Marshal(n.a.Report())
			if err != nil {
				t.Fatal(err)
			}
			queue = append(queue, inFlight{at: l.now.Add(drawn(0, 90*time.Second)), node: n, body: body})
		}
		sort.SliceStable(queue, func(i, j int) bool { return queue[i].at.Before(queue[j].at) })
		for len(queue) > 0 && !queue[0].at.After(l.now) {
			f := queue[0]
			queue = queue[1:]
			if !f.node.gone {
				deliver(f)
			}
		}
		if l.now.Before(nextCycle) {
			continue
		}
		nextCycle = l.now.Add(time.Minute)
		// The drains the controller holds as the cycle starts: those a
		// termination in it may end.
		held := map[string]string{}
		drains, err := l.store.Drains()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range drains {
			held[r.Node] = l.c.drainRequest(r).ID
		}
		plan, err := l.c.Cycle(ctx)
		if err != nil {
			t.Fatalf("seed %d: cycle: %v", seed, err)
		}
		for _, a := range plan.Actions {
			if a.Kind != planner.Terminate {
				continue
			}
			i := slices.IndexFunc(nodes, func(n *skewedNode) bool { return n.id == a.Node })
			if i < 0 {
				t.Fatalf("seed %d: terminate of a node never launched: %+v", seed, a)
			}
			n := nodes[i]
			d := held[a.Node]
			got, ok := n.received[d]
			exited := !n.exitAt.IsZero() && !l.now.Before(n.exitAt)
			switch {
			case !ok:
				t.Errorf("seed %d: %s terminated (%s) but its agent never received drain %q", seed, n.id, a.Reason, d)
			case !exited && !n.lastCkpt.After(got):
				t.Errorf("seed %d: %s terminated (%s): its job last checkpointed at %v, not after its agent received the drain at %v (agent clock %v off, drain %s)",
					seed, n.id, a.Reason, n.lastCkpt.Sub(t0), got.Sub(t0), n.off, d)
			}
			n.gone = true
			terminations++
		}
	}
	return terminations
}

// checkpoint is the job saving its state now (true time now).
func (n *skewedNode) checkpoint(t *testing.T, now time.Time) {
	t.Helper()
	if err := n.a.Checkpoint("train"); err != nil {
		t.Fatal(err)
	}
	n.lastCkpt = now
}

// TestLateTerminationLosesLittle: a drained node's termination is put off
// for an hour (its pool cannot be read) while its job, asked to
// checkpoint once, trains on. However late the termination comes, the
// job's last checkpoint is recent: the agent's confirmation stands for
// agent.SafeFor only, after which it asks the job again (or fails the
// drain at its deadline, and the node stays).
func TestLateTerminationLosesLittle(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	wrap := &unreadable{Provider: l.cloud, failing: map[string]bool{}, changes: map[string]int{}}
	l.restart(t, wrap)
	tokens := nodeauthtest.New(t)
	api := l.c.Handler(APIOptions{Credentials: tokens})
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 1); err != nil {
		t.Fatal(err)
	}
	l.set.Pools[0].Max = 0 // lowered: the busy node is drained, whatever the demand
	g, _ := l.cloud.Describe(ctx, p)
	id := g.Instances[0].ID
	var due []time.Time
	var lastCkpt time.Time
	a, err := agent.New(agent.Config{Node: id, GPUs: oneGPU{1 << 30}, Now: func() time.Time { return l.now },
		Signal: func(_ int, sig syscall.Signal) error {
			if sig != 0 {
				due = append(due, l.now.Add(30*time.Second))
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Register("train", []int{0}, []int{1 << 30})
	l.now = l.now.Add(5 * time.Minute)
	send := func() {
		body, _ := json.Marshal(a.Report())
		req := httptest.NewRequest(http.MethodPost, "/v1/agents/"+id+"/report", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens.For(id))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		var ans report.Answer
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
			t.Fatalf("answer %d %s", w.Code, w.Body)
		}
		_ = a.Drain(ans.Drain)
	}
	terminatedAt, drainedAt := time.Time{}, time.Time{}
	for minute := range 150 {
		for range 6 { // a report every 10 s
			l.now = l.now.Add(10 * time.Second)
			for len(due) > 0 && !l.now.Before(due[0]) {
				due = due[1:]
				_ = a.Checkpoint("train")
				lastCkpt = l.now
			}
			if minute%20 == 0 && lastCkpt.Before(l.now.Add(-20*time.Minute)) {
				_ = a.Checkpoint("train") // its own schedule, every 20 minutes
				lastCkpt = l.now
			}
			a.Tick()
			send()
		}
		if drainedAt.IsZero() {
			if drains, _ := l.store.Drains(); slices.ContainsFunc(drains, func(d state.Drain) bool { return d.Node == id }) {
				drainedAt = l.now
			}
		}
		// Once it is drained, its pool cannot be read for 70 minutes: the
		// termination waits.
		if !drainedAt.IsZero() && l.now.Sub(drainedAt) < 70*time.Minute {
			wrap.failing["g5"] = true
		} else {
			wrap.failing["g5"] = false
		}
		plan, _ := l.c.Cycle(ctx) // an unreadable pool is the cycle's error
		for _, act := range plan.Actions {
			if act.Kind == planner.Terminate && act.Node == id {
				terminatedAt = l.now
				if lost := l.now.Sub(lastCkpt); lost > agent.SafeFor+3*time.Minute {
					t.Fatalf("terminated %v after the drain began, %v after the job's last checkpoint (%s)", l.now.Sub(drainedAt), lost, act.Reason)
				}
			}
		}
		if !terminatedAt.IsZero() {
			break
		}
	}
	if drainedAt.IsZero() || terminatedAt.Sub(drainedAt) < time.Hour {
		t.Fatalf("drained at %v, terminated at %v: the test did not put the termination off for an hour", drainedAt, terminatedAt)
	}
}
