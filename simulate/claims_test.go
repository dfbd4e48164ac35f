package simulate

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// claimWatch wraps the predictive policy and checks, after every cycle,
// what the actuator made of the launches against what the engine knows
// launched them.
type claimWatch struct {
	*predictive
	// Someone else (a person, another controller) launches a node in the
	// first burst pool every foreign cycles, and into the pool of every
	// alongside-th launch of this controller, just before it (0: never).
	foreign, alongside int
	cycles, launching  int
	others             int
	errs               []string
	// overlapping counts the cycles in which two of one pool's launches
	// still had units to claim: when claims can go to the wrong launch.
	overlapping int
}

// other launches a node that this controller did not, in pool pi.
func (w *claimWatch) other(e *engine, pi int) {
	n, _ := e.launch(pi, 1, secs(e.pools[pi].spec.LeadTime))
	w.others += n
}

func (w *claimWatch) tick(e *engine) error {
	if w.cycles == 0 && w.alongside > 0 {
		w.cloud.beforeLaunch = func(pi int) {
			if w.launching++; w.launching%w.alongside == 0 {
				w.other(e, pi)
			}
		}
	}
	w.cycles++
	if order := burstOrder(e.pools, false); w.foreign > 0 && w.cycles%w.foreign == 0 && len(order) > 0 {
		w.other(e, order[0])
	}
	// The truth, from the engine: every node booting in the region as the
	// cycle starts, and whether this controller launched it (the
	// reservations the engine holds come up at once). The cycle's state
	// counts each once as booting capacity. A keyed group tells whose
	// each is: every node this controller launched is its own, and none
	// someone else did. A group with a target size tells only how many
	// nodes showed: alone in it, the controller owns every node it
	// launched; beside someone else, which nodes are whose is not known
	// (its launches' units are alike), and only the claims' records are
	// checked (below).
	boot := 0
	for _, n := range e.live {
		// A keyed group shows nothing of a node it does not list yet but
		// this controller's launch records (its stand-ins).
		if n.state == booting && (!w.keyedCloud || n.key != "" || !w.cloud.owes(n)) {
			boot++
		}
	}
	if err := w.predictive.tick(e); err != nil {
		return err
	}
	fail := func(format string, args ...any) {
		if len(w.errs) < 5 {
			w.errs = append(w.errs, fmt.Sprintf("at %ds: ", e.now)+fmt.Sprintf(format, args...))
		}
	}
	pending := 0
	for i := range w.state.Nodes {
		n := &w.state.Nodes[i]
		if n.State != fleet.Pending {
			continue
		}
		pending++
		if w.others > 0 && !w.keyedCloud {
			continue
		}
		switch en := e.liveNode(n.ID); {
		case en == nil: // a stand-in for a launch not listed yet
			if n.Unknown && w.others == 0 {
				fail("stand-in %s, for this controller's launch, read as unknown", n.ID)
			}
		case en.key == "" && !n.Unknown:
			fail("node %s, launched by someone else, read as this controller's own", n.ID)
		case en.key != "" && n.Unknown:
			fail("node %s, launched by this controller, read as unknown", n.ID)
		}
	}
	if pending != boot {
		fail("%d nodes pending in the cycle's state; the region has %d booting", pending, boot)
	}
	// No instance is claimed by two launches, nor a launch for more than
	// it added.
	launches, err := w.books.Launches()
	if err != nil {
		return err
	}
	by := map[string]string{}
	open := map[string]int{}
	for _, l := range launches {
		if len(l.Claimed)+l.Spent > l.Count {
			fail("launch %s of %d claims %d and spent %d", l.Key, l.Count, len(l.Claimed), l.Spent)
		}
		for _, id := range l.Claimed {
			if other, ok := by[id]; ok {
				fail("%s claimed by launches %s and %s", id, other, l.Key)
			}
			if n := e.liveNode(id); n != nil && n.key == "" && w.keyedCloud {
				fail("%s, launched by someone else, claimed by launch %s", id, l.Key)
			}
			by[id] = l.Key
		}
		if l.Unclaimed() > 0 {
			open[l.Pool]++
		}
	}
	for _, n := range open {
		if n > 1 {
			w.overlapping++
			break
		}
	}
	return nil
}

// TestLaunchesClaimedOnce runs the predictive policy through the
// controller's actuator over random traces, with the region listing a
// node up to several cycles after its launch, so that launches overlap in
// what they have yet to claim: in groups with a target size (which owe
// what they do not list yet, as an Auto Scaling group's listing trails its
// desired capacity) and in keyed groups (EC2 instances from a launch
// template: not listed yet, they are not listed), with and without
// someone else launching into the same pool. Every node the region boots
// is counted once; none someone else launched is ever the controller's
// own, and each it launched is (but where the group cannot tell them
// apart); no instance is claimed twice.
func TestLaunchesClaimedOnce(t *testing.T) {
	cfg := exampleConfig(t)
	overlapping, others := 0, 0
	for seed, tt := range []struct {
		lag                time.Duration
		keyed              bool
		foreign, alongside int
	}{{time.Minute, false, 0, 0}, {2 * time.Minute, true, 0, 0}, {3 * time.Minute, false, 7, 2}, {4 * time.Minute, true, 5, 2}, {2 * time.Minute, false, 3, 1}} {
		tr := randomTrace(uint64(seed+1), 400)
		w := &claimWatch{foreign: tt.foreign, alongside: tt.alongside}
		runPredictive(t, cfg, tr, Options{Seed: int64(seed + 1), listLag: tt.lag, keyedCloud: tt.keyed}, func(p *predictive) policy { w.predictive = p; return w })
		for _, e := range w.errs {
			t.Errorf("seed %d, listed %v after launch, keyed %v, someone else launching every %d cycles and beside every %d launches: %s",
				seed+1, tt.lag, tt.keyed, tt.foreign, tt.alongside, e)
		}
		overlapping += w.overlapping
		others += w.others
	}
	if overlapping == 0 || others == 0 {
		t.Errorf("%d cycles had two launches of one pool with units to claim, %d nodes launched by someone else: the test does not test claims", overlapping, others)
	}
}
