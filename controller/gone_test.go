package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// hiding is a cloud whose listings omit some instances, as an eventually
// consistent read may for a moment.
type hiding struct {
	providers.Provider
	mu   sync.Mutex
	hide map[string]bool
}

func (h *hiding) Describe(ctx context.Context, p fleet.Pool) (providers.Group, error) {
	g, err := h.Provider.Describe(ctx, p)
	h.mu.Lock()
	defer h.mu.Unlock()
	g.Instances = slices.DeleteFunc(g.Instances, func(in providers.Instance) bool { return h.hide[in.ID] })
	return g, err
}

// TestBrieflyUnlistedNodeRemembered: a listing omits a draining node for
// two cycles. Its drain, ready time, first sighting and credential stand
// (before, all were forgotten at once: it came back undrained, and its
// agent refused); once listed again, it is the same node, draining. A
// node unlisted for GoneGrace is gone, and forgotten.
func TestBrieflyUnlistedNodeRemembered(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	p.Min = 2
	l := newLoop(t, false, p)
	h := &hiding{Provider: l.cloud, hide: map[string]bool{}}
	l.restart(t, h)
	creds := nodeauthtest.New(t)
	l.c.creds = creds
	for range 7 {
		l.cycle(t)
	}
	g, _ := l.cloud.Describe(context.Background(), p)
	if len(g.Instances) != 2 {
		t.Fatalf("%d instances, want the pool's min of 2", len(g.Instances))
	}
	node := g.Instances[0].ID
	tok := creds.For(node)
	if err := l.store.PutDrain(state.Drain{Node: node, Pool: "g5", Started: l.now, Deadline: l.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l.cycle(t)
	h.mu.Lock()
	h.hide[node] = true
	h.mu.Unlock()
	for range 2 {
		l.cycle(t)
	}
	if d, _ := l.store.Drains(); !slices.ContainsFunc(d, func(d state.Drain) bool { return d.Node == node }) {
		t.Errorf("drains %v: the briefly unlisted node's drain was forgotten", d)
	}
	if err := creds.Check(node, tok); err != nil {
		t.Errorf("the briefly unlisted node's credential: %v, want it kept", err)
	}
	if r, _ := l.store.ReadyNodes(); !slices.ContainsFunc(r, func(x state.NodeTime) bool { return x.Node == node }) {
		t.Errorf("ready nodes %v: the briefly unlisted node's ready time was forgotten", r)
	}
	h.mu.Lock()
	h.hide[node] = false
	h.mu.Unlock()
	l.cycle(t)
	for _, n := range l.c.Last().State.Nodes {
		if n.ID == node && (n.State != fleet.Draining || n.Unknown) {
			t.Errorf("listed again: %s, unknown %v; want it draining, as before", n.State, n.Unknown)
		}
	}
	// Unlisted for GoneGrace: gone, and forgotten.
	h.mu.Lock()
	h.hide[node] = true
	h.mu.Unlock()
	l.cycle(t)
	l.now = l.now.Add(GoneGrace)
	l.cycle(t)
	if err := creds.Check(node, tok); err == nil {
		t.Error("a node unlisted for GoneGrace keeps its credential")
	}
	if d, _ := l.store.Drains(); slices.ContainsFunc(d, func(d state.Drain) bool { return d.Node == node }) {
		t.Errorf("drains %v: a node unlisted for GoneGrace keeps its drain", d)
	}
}
