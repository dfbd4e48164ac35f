package controller

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
)

// TestRealAgentConfirmsDrain runs the real agent daemon's reporter
// against the controller's own API: the drain the controller hands out is
// confirmed by the agent's next report (the cordon), by its ID, and only
// then; a drain with another ID is not.
func TestRealAgentConfirmsDrain(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	tokens := nodeauthtest.New(t)
	srv := httptest.NewServer(l.c.Handler(APIOptions{Credentials: tokens}))
	defer srv.Close()
	a, err := agent.New(agent.Config{Node: "i-1", Now: func() time.Time { return l.now }})
	if err != nil {
		t.Fatal(err)
	}
	rep := &agent.Reporter{Agent: a, Controller: srv.URL, Credential: agent.FixedCredential(tokens.For("i-1"))}
	send := func() {
		t.Helper()
		l.now = l.now.Add(time.Second)
		a.Tick()
		if err := rep.Send(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	send()
	d := &report.DrainRequest{ID: "drain-i-1-1", Since: l.now, Deadline: l.now.Add(time.Hour), Signal: "SIGUSR1"}
	l.agents.SetDrain("i-1", d)
	if l.agents.Holds("i-1", d.ID) {
		t.Fatal("held before the agent heard of the drain")
	}
	send() // the answer carries the drain
	send() // this report says the agent holds it
	if !l.agents.Holds("i-1", d.ID) {
		t.Fatal("the agent's report does not confirm the drain it was given")
	}
	if l.agents.Holds("i-1", "drain-i-1-other") {
		t.Fatal("a drain with another ID counts as held")
	}
}
