package controller

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/fleetcast/autoscaler/slurm/hostlist"
)

// The routes Slurm's ResumeProgram and SuspendProgram post to
// (`autoscaler slurm resume|suspend HOSTLIST`), with a token of scope
// demand.
const (
	SlurmResumePattern  = "POST /v1/slurm/resume"
	SlurmSuspendPattern = "POST /v1/slurm/suspend"
)

// SlurmRequest is what `autoscaler slurm resume|suspend` posts: the
// hostlist Slurm gave its program.
type SlurmRequest struct {
	Nodes string `json:"nodes"`
}

// SlurmAnswer is the controller's answer: the nodes, each once, and what
// becomes of the request.
type SlurmAnswer struct {
	Nodes []string `json:"nodes"`
	Note  string   `json:"note"`
}

// maxSlurmRequest bounds a request's body, and maxSlurmNodes the nodes
// one names.
const (
	maxSlurmRequest = 1 << 20
	maxSlurmNodes   = 100_000
)

// slurmProgram serves Slurm's ResumeProgram (resume true) or
// SuspendProgram, which hand their hostlists to the controller instead of
// acting. Neither changes anything at once: a resume has the Slurm source
// read the cluster now, so that the nodes Slurm powers up for its jobs are
// requests (a whole node of demand each, launched by name) within a
// cycle rather than an interval; a suspend is logged, as the controller
// powers a node down itself once its instance is gone, and decides alone
// when an instance goes. Every node must be of a pool of Slurm nodes.
func (c *Controller) slurmProgram(resume bool) http.HandlerFunc {
	program := "suspend"
	if resume {
		program = "resume"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.slurm
		if s == nil || s.names.control == nil {
			http.Error(w, "this controller changes no Slurm node: no pool has slurm { nodes }, or it is a dry run", http.StatusConflict)
			return
		}
		var req SlurmRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxSlurmRequest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, fmt.Sprintf("slurm %s: want {\"nodes\": \"HOSTLIST\"}: %v", program, err), http.StatusBadRequest)
			return
		}
		names, err := hostlist.Expand(req.Nodes)
		if err == nil && len(names) > maxSlurmNodes {
			err = fmt.Errorf("%d nodes, more than %d", len(names), maxSlurmNodes)
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("slurm %s: nodes: %v", program, err), http.StatusBadRequest)
			return
		}
		slices.Sort(names)
		names = slices.Compact(names)
		for _, n := range names {
			if len(s.poolsOfName(n)) == 0 {
				http.Error(w, fmt.Sprintf("slurm %s: node %q is in no pool of Slurm nodes (a pool's slurm { nodes })", program, n), http.StatusBadRequest)
				return
			}
		}
		ans := SlurmAnswer{Nodes: names}
		if resume {
			s.Poke()
			ans.Note = "the cluster is read now: a node powering up for a job with no instance is launched by name"
		} else {
			ans.Note = "the controller powers down a node once its instance is gone, and decides when an instance goes"
		}
		c.log.Info("slurm "+program, "nodes", hostlist.Compress(names))
		writeJSON(w, ans)
	}
}
