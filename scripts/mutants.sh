#!/usr/bin/env bash
# Checks that the safety rules' tests can fail: each mutant removes one
# rule's code (in a scratch copy of the tree, never here) and the tests
# named, which must pass on the tree unmutated, must then fail on an
# assertion: a mutant that does not build, a panic, a timeout or a failure
# with no failed assertion does not count as killed. Run it after changing a rule or its tests:
#   scripts/mutants.sh            # every mutant
#   scripts/mutants.sh halt       # the mutants whose name contains "halt"
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
only=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each mutant: its name, the file, the code to replace and its
# replacement (Python string literals, so that a line break is \n and a
# tab \t), the packages and the -run pattern of the tests that must fail.
mutants() {
  cat <<'EOF'
booting capacity not counted (planner property)
planner/observe.go
"\t\t\tpp.serve(t, n)\n\t\tcase fleet.Ready:"
"\t\t\tpp.active++\n\t\tcase fleet.Ready:"
./planner
TestPropertySafety

booting capacity not counted (controller)
planner/observe.go
"\t\t\tpp.serve(t, n)\n\t\tcase fleet.Ready:"
"\t\t\tpp.active++\n\t\tcase fleet.Ready:"
./controller
TestBootingCapacityCounts

no silent-share halt (planner property)
planner/scalein.go
"readyNodes > 0 && float64(silent) > share"
"false && readyNodes > 0 && float64(silent) > share"
./planner
TestPropertySafety

no silent-share halt (controller)
planner/scalein.go
"readyNodes > 0 && float64(silent) > share"
"false && readyNodes > 0 && float64(silent) > share"
./controller
TestSilentAgentsHaltScaleIn

deadline applied to unknown instances (planner property)
planner/observe.go
"len(n.Jobs) == 0 && n.Unknown {"
"len(n.Jobs) == 0 && n.Unknown && false {"
./planner
TestPropertySafety

deadline applied to unknown instances (controller, simulated cloud)
controller/controller.go
"\t\t\t\tif own {"
"\t\t\t\tif own || true {"
./controller
TestAdoptedFleetIsNeverKilled

deadline applied to unknown instances (controller, moto)
controller/controller.go
"\t\t\t\tif own {"
"\t\t\t\tif own || true {"
./providers/aws
TestAdoptedFleetIsNeverKilled

spend counted at max x price (planner property)
planner/planner.go
"\t\tnodes = max(nodes, pp.spec.Max)"
"\t\tnodes = pp.spec.Max"
./planner
TestPropertySafety

spend counted at max x price (planner)
planner/planner.go
"\t\tnodes = max(nodes, pp.spec.Max)"
"\t\tnodes = pp.spec.Max"
./planner
TestSpendCountsWhatIsPaid

a launch past its deadline not counted against the limits while terminated
planner/observe.go
"\t\t\t\tt.overdue = append(t.overdue, overdue{pp: pp, node: n})\n\t\t\t\tpp.countStuck(t)\n"
"\t\t\t\tt.overdue = append(t.overdue, overdue{pp: pp, node: n})\n"
./controller
TestFailedTerminationCountsAgainstLimits

stuck nodes counted in the scale-in budget
planner/scalein.go
"size := pp.size - pp.stuck"
"size := pp.size"
./planner
TestStuckNodesDoNotWidenScaleIn

a node decided above its max listed again (planner property)
planner/scalein.go
"\t\t\ts.decided[n.ID] = true"
"\t\t\t_ = n"
./planner
TestPropertySafety

a node decided above its max listed again (example)
planner/scalein.go
"\t\t\ts.decided[n.ID] = true"
"\t\t\t_ = n"
./planner
TestAboveMaxNodesListedOnce

pool above its max not brought back
planner/scalein.go
"if pp.active > floor && len(pp.candidates) > 0 {"
"if false && pp.active > floor && len(pp.candidates) > 0 {"
./planner
TestPoolAboveMaxIsBroughtBack

absurd forecast clamped, not dropped
planner/forecast_input.go
"\t\tif huge > 0 {"
"\t\tif false && huge > 0 {"
./planner
TestAbsurdForecastIsNotUsed|TestPropertySafety

a claim outside the launch's provisioning timeout
actuator/claim.go
"return now.After(l.At) && now.Sub(l.At) <= timeout"
"return now.After(l.At)"
./controller
TestOldLaunchNeverClaimsANewInstance

a claim when more new instances show than the launch's units
actuator/claim.go
"ambiguous := !keyed && len(free) > units"
"ambiguous := false"
./controller
TestReplacementNeverClaimed

an instance claimed after the cycle it was first seen
actuator/claim.go
"(keyed || fresh(in.ID))"
"(keyed || true)"
./controller ./actuator
TestReplacementNeverClaimed|TestClaim

an instance claimed twice (simulate property)
actuator/claim.go
"\t\t\tl.Claimed = append(l.Claimed, in.ID)\n\t\t\ttaken[in.ID] = true\n"
"\t\t\tl.Claimed = append(l.Claimed, in.ID)\n"
./simulate
TestLaunchesClaimedOnce

an instance claimed twice (claim)
actuator/claim.go
"\t\t\tl.Claimed = append(l.Claimed, in.ID)\n\t\t\ttaken[in.ID] = true\n"
"\t\t\tl.Claimed = append(l.Claimed, in.ID)\n"
./actuator
TestClaim

claims not kept in the state
actuator/clouds.go
"if len(r.claimed) > 0 {"
"if false && len(r.claimed) > 0 {"
./controller
TestAdoptedFleetIsNeverKilled

a claimed instance, gone, not counted against its launch
state/launches.go
"func (l Launch) Unclaimed() int { return max(0, l.Count-len(l.Claimed)-l.Spent) }"
"func (l Launch) Unclaimed() int { return max(0, l.Count-l.Spent) }"
./controller
TestOwnLaunchClaimedOnceForGood

a stand-in given up, and matched again
actuator/clouds.go
"\t\t\tl.Spent++\n"
"\n"
./controller
TestUnlistedLaunchGivenUpOnce

no grace from the start for an own launch after a restart
actuator/clouds.go
"return later(at, r.c.started), true"
"return at, true"
./controller
TestOwnLaunchTerminatedAcrossAnOutage

launch records never forgotten
actuator/clouds.go
"if now.Sub(l.At) > 2*p.ProvisionTimeout && (!inConfig || !waiting(l)) {"
"if false && now.Sub(l.At) > 2*p.ProvisionTimeout && (!inConfig || !waiting(l)) {"
./controller
TestOwnLaunchTerminatedAcrossAnOutage

a launch record forgotten while its instance waits to be ready
actuator/clouds.go
"(!inConfig || !waiting(l))"
"(!inConfig || !waiting(l) || true)"
./controller
TestOwnLaunchTerminatedAcrossAnOutage

journaled launches not counted as capacity
actuator/clouds.go
"\t\tfor _, in := range inFlight[p.Name] {"
"\t\tfor _, in := range inFlight[\"\"] {"
./controller
TestUnsettledLaunchCountsAgainstLimits

a keyed launch dropped, not sent again
actuator/actuator.go
"case !g.Keyed || a.now().Sub(in.Created) > pool.ProvisionTimeout:"
"case true:"
./controller
TestRestartWithLaggingReadsLaunchesOnce|TestRecoverKeyedLaunch

demand not capped per node
loop/loop.go
"u := min(n.UsedGPUs(), gpn)"
"u := min(n.UsedGPUs(), gpn+1<<20)"
./controller
TestDemandCappedPerNode

a GPU listed twice for a job
agent/report/report.go
"\t\t\tcase listed[g]:"
"\t\t\tcase false:"
./agent/report
TestReportCannotInflateDemand

held GPUs not bounded by the node's
agent/report/report.go
"\tif err := r.checkHeld(limit); err != nil {"
"\tif err := r.checkHeld(1 << 20); err != nil {"
./agent/report
TestReportCannotInflateDemand

zero-length jobs waiting for capacity
simulate/engine.go
"j.remaining == 0 {"
"j.remaining < 0 {"
./simulate
TestZeroLengthJobs

simulated agent confirms a drain while jobs remain
simulate/predictive.go
"fn.DrainConfirmed = acked && len(n.jobs) == 0\n"
"fn.DrainConfirmed = acked\n"
./simulate
TestPredictiveNeverLosesWorkToScaleIn

drain checkpoints durable at once (simulate)
simulate/jobs.go
"\tcase e.ckptDur == 0:\n"
"\tcase true:\n"
./simulate
TestBrokenDrainRuleLosesWork|TestDrainCheckpoints

no job ignores a drain (simulate)
simulate/jobs.go
"\tcase j.unresponsive || j.saveAt >= 0:\n"
"\tcase j.saveAt >= 0:\n"
./simulate
TestBrokenDrainRuleLosesWork|TestDrainCheckpoints

lost work not split by cause (simulate)
simulate/jobs.go
"\t\tif why == stopScaleIn {\n"
"\t\tif why != stopSaved {\n"
./simulate
TestLossByCause|TestDrainCheckpoints

drain terminated without the agent's confirmation (planner property)
planner/observe.go
"\tcase !n.DrainConfirmed:"
"\tcase false && !n.DrainConfirmed:"
./planner
TestPropertySafety

drain terminated without the agent's confirmation (controller, clocks off and reports late)
planner/observe.go
"\tcase !n.DrainConfirmed:"
"\tcase false && !n.DrainConfirmed:"
./controller
TestDrainNeverBeatsTheAgentsConfirmation

agent says safe with jobs still waiting (controller, clocks off and reports late)
agent/drain.go
"case len(waiting) == 0 && a.unknown == 0"
"case a.unknown == 0"
./controller
TestDrainNeverBeatsTheAgentsConfirmation

agent waits for long-running jobs only
agent/drain.go
"if j.LastCheckpoint.After(a.since) || a.exited(j) {"
"if !a.longRunning(j, now) || j.LastCheckpoint.After(a.since) || a.exited(j) {"
./agent
TestDrainSafetyEdges

checkpoint file taken at when it was noticed
agent/checkpoints.go
"j.LastCheckpoint = earlier(f.mtime, j.newest.seen)"
"j.LastCheckpoint = now"
./agent
TestDrainSafetyEdges

checkpoint file not bounded by when the agent first saw it
agent/checkpoints.go
"j.LastCheckpoint = earlier(f.mtime, j.newest.seen)"
"j.LastCheckpoint = f.mtime"
./agent
TestDrainSafetyEdges

checkpoint file dated in the future trusted
agent/checkpoints.go
"\t\tcase f.mtime.After(now):"
"\t\tcase f.mtime.After(now) && false:"
./agent
TestDrainSafetyEdges

new job taken on a draining node
agent/jobs.go
"if j == nil && a.drain != nil && a.state != report.DrainFailed {"
"if false {"
./agent
TestDrainSafetyEdges|TestDrainingRefusesJobsOverTheAPI

GPUs never read vouched for by the agent
agent/drain.go
"(a.cfg.GPUs == nil || a.gpusRead)"
"true"
./agent
TestDrainSafetyEdges

unclaimed GPU processes forgotten while the GPUs cannot be read
controller/agents.go
"rr.Unknown = v.unknown"
"rr.Unknown = nil"
./controller
TestUnreadableGPUsNeverIdle

empty node with unreadable GPUs taken for idle (planner property)
planner/scalein.go
"\tif n.GPUFault != \"\" && len(n.Jobs) == 0 {"
"\tif false {"
./planner
TestPropertySafety

empty node with unreadable GPUs taken for idle (controller)
planner/scalein.go
"\tif n.GPUFault != \"\" && len(n.Jobs) == 0 {"
"\tif false {"
./controller
TestUnreadableGPUsNeverIdle

agent clock ahead not corrected
controller/agents.go
"shift := min(0, now.Sub(r.SentAt))"
"shift := time.Duration(0)"
./controller
TestAgentsTimesAreTheControllers

orphan reaped before its agent reports it idle (planner property)
planner/reap.go
"\t\t\tcase idle < ReapIdle:"
"\t\t\tcase false:"
./planner
TestPropertySafety

orphan whose agent went silent reaped
planner/reap.go
"\t\t\tcase silent > 0:\n\t\t\t\ts := silentReason(n, silent)\n\t\t\t\ta.Code, a.Reason = s.code, why+\"; \"+s.text+\": never reaped while silent\"\n"
"\t\t\tcase false:\n"
./controller
TestOrphansReaped

another fleet's instance listed as an orphan (simulated cloud)
providers/sim/cloud.go
"if in.Fleet != fleetName || fleetName == \"\" || in.LaunchKey == \"\" {"
"if fleetName == \"\" || in.LaunchKey == \"\" {"
./providers/sim
TestOrphans

another fleet's instance listed as an orphan (AWS)
providers/aws/orphans.go
"tag(in.Tags, TagFleet) != fleetName || "
""
./providers/aws
TestOrphanTags

an Auto Scaling group's instance listed as an orphan (AWS)
providers/aws/orphans.go
" || tag(in.Tags, tagASG) != \"\""
""
./providers/aws
TestOrphanTags

node under a spot interruption notice counted as capacity (controller)
planner/observe.go
"\t\t\tif interrupted(n, p.now) {\n\t\t\t\t// The cloud takes it"
"\t\t\tif false {\n\t\t\t\t// The cloud takes it"
./controller
TestSpotNoticeReplacedAhead

node under a spot interruption notice drained (planner property)
planner/observe.go
"\t\t\tif interrupted(n, p.now) {\n\t\t\t\t// The cloud takes it"
"\t\t\tif false {\n\t\t\t\t// The cloud takes it"
./planner
TestPropertySafety

a spot notice long past taken as still due (planner)
planner/observe.go
"now.Sub(n.InterruptAt) <= StaleNotice"
"true"
./planner
TestPropertySafety|TestSpotNotices

spot notices not watched by the agent command
cmd/autoscaler/agent.go
"\tif *notices != \"none\" {"
"\tif false {"
./cmd/autoscaler
TestAgentSpotNotice

GCE preemption notices not read by the agent command
cmd/autoscaler/agent.go
"\t\t\tw.Source = &spot.GCE{Endpoint: *gceEndpoint}"
"\t\t\t_ = gceEndpoint"
./cmd/autoscaler
TestAgentGCEPreemption

a drain's confirmation stands for ever
agent/drain.go
"now.Sub(a.safeSince) > SafeFor {"
"false {"
./agent
TestDrainSafetyEdges

a checkpoint file bounded by the scan that saw it, not the one before
agent/checkpoints.go
"\t\t\tf.seen = j.scanned\n"
"\t\t\tf.seen = scanAt\n"
./agent
TestDrainSafetyEdges

the agent's state file not read at start
agent/agent.go
"\t\tif err := a.load(); err != nil {"
"\t\tif err := error(nil); err != nil {"
./agent
TestStateSurvivesRestart

a failed notice drain ignores the controller's drains for good
agent/drain.go
"\t\ta.notice = false // the controller"
"\t\t_ = 0 // the controller"
./agent
TestDrainSafetyEdges

another fleet's instances counted in a pool
actuator/clouds.go
"\t\tinstances = c.ownFleet(instances)\n"
"\n"
./controller
TestAnotherFleetsInstancesLeftOut

a notice no longer reported still counts
controller/agents.go
"\tv.notice = nil\n"
"\n"
./controller
TestAgentsNoticeAndFault

a reap not journaled
actuator/clouds.go
"\treturn c.act.Reap(ctx, r, c.fleet, o)"
"\treturn r.TerminateOrphan(ctx, c.fleet, o)"
./controller
TestReapJournaled

observation writes ready times
controller/controller.go
"\t\t\t\tf.ready = append(f.ready, in.ID)\n"
"\t\t\t\tf.ready = append(f.ready, in.ID)\n\t\t\t\tc.store.PutReady(now, in.ID)\n"
./controller
TestObservationOnlyReads

observation protects
controller/controller.go
"\tst, err := c.observe(ctx, now, f, drains)\n\tif err != nil {\n\t\treturn loop.Observation{}, err\n\t}\n"
"\tst, err := c.observe(ctx, now, f, drains)\n\tif err != nil {\n\t\treturn loop.Observation{}, err\n\t}\n\tc.protect(ctx, &st)\n"
./controller
TestObservationOnlyReads

a record gains a second writer
controller/gone.go
"\t\tgone = append(gone, d.Node)\n"
"\t\tgone = append(gone, d.Node)\n\t\tc.store.DeleteDrain(d.Node)\n"
./state
TestWritersOneOwner

terminated node's drain kept
loop/loop.go
"\t\t\t\terr = errors.Join(err, followUp(l.o.Books.DeleteDrain(a.Node)))\n"
"\t\t\t\terr = errors.Join(err, nil)\n"
./loop
TestActBooks

gone nodes' drains kept
loop/loop.go
"\tfor _, node := range gone {\n"
"\tfor _, node := range gone[:0] {\n"
./loop ./controller
TestCommitBeforeActing|TestObservationOnlyReads

a drain's confirmation past its deadline stands for ever
agent/drain.go
"if a.state == report.SafeToTerminate && now.Sub(a.safeSince) > SafeFor {"
"if a.state == report.SafeToTerminate && now.Sub(a.safeSince) > SafeFor && now.Before(a.deadline) {"
./controller
TestLateTerminationLosesLittle

an interruption during a drain asks no job again
agent/notice.go
"\t\tif n.Kind == report.Interruption && !a.notice {"
"\t\tif false {"
./agent
TestDrainSafetyEdges

a job's first scan during a drain trusts what is there
agent/checkpoints.go
"\t\t\t\tif a.drain != nil && a.since.Before(f.seen) {"
"\t\t\t\tif false {"
./agent
TestDrainSafetyEdges|TestStateSurvivesRestart

jobs of another boot loaded
agent/persist.go
"if s.Boot != a.boot || a.exited(j) {"
"if a.exited(j) {"
./agent
TestStateSurvivesRestart

a renamed fleet takes its state
state/store.go
"\t\tcase string(got) != name:"
"\t\tcase false:"
./controller
TestAnotherFleetsInstancesLeftOut

reaps beside scale-in's budget (planner property)
planner/reap.go
"\tbudget := &t.scaleInLeft\n\tfor _, n := range t.orphans {"
"\town := p.cfg.Limits.MaxScaleInPerCycle\n\tbudget := &own\n\tfor _, n := range t.orphans {"
./planner
TestPlanScenarios|TestPropertySafety

a withdrawn notice never reported gone
agent/spot/spot.go
"\t\tif err == nil {\n\t\t\tfor _, k := range"
"\t\tif false {\n\t\t\tfor _, k := range"
./agent/spot
TestRunSaysWhenANoticeIsWithdrawn

node credential: a registered node bootstraps again
nodeauth/registry.go
"\t\tcase old.Revoked.IsZero():\n"
"\t\tcase false:\n"
./nodeauth ./cmd/autoscaler
TestRegistryLifecycle|TestBootstrap|TestDeployOnAWS

node credential: another node's credential accepted
nodeauth/registry.go
"\tcase owner != node:\n"
"\tcase false && owner != node:\n"
./nodeauth ./cmd/autoscaler
TestRegistryLifecycle|TestDeployOnAWS

node credential: a revoked credential accepted
nodeauth/registry.go
"\tcase !c.Revoked.IsZero():\n"
"\tcase false:\n"
./nodeauth ./cmd/autoscaler
TestRegistryLifecycle|TestBootstrap|TestDeployOnAWS

node credential: a rotated-out credential good forever
nodeauth/registry.go
"\t\tc.Previous, c.PreviousUntil = \"\", time.Time{}\n\t\tif err := r.store.PutCredential(c); err != nil {\n\t\t\tr.log.Warn"
"\t\tif err := r.store.PutCredential(c); err != nil {\n\t\t\tr.log.Warn"
./nodeauth ./cmd/autoscaler
TestRegistryLifecycle|TestDeployOnAWS

node credential: an unsigned identity accepted
nodeauth/aws.go
"\tif !verified {"
"\tif false && !verified {"
./nodeauth
TestBootstrap

node credential: another instance's identity document accepted
nodeauth/server.go
"\tif doc.InstanceID != node {"
"\tif false && doc.InstanceID != node {"
./nodeauth
TestBootstrap

node credential: an instance that is not live bootstraps
nodeauth/server.go
"\tif !ok {\n\t\treturn proof{}, refuse(http.StatusForbidden, NotLive"
"\tif !ok && false {\n\t\treturn proof{}, refuse(http.StatusForbidden, NotLive"
./nodeauth ./cmd/autoscaler
TestBootstrap|TestDeployOnAWS

node credential: a wrong bootstrap secret accepted
nodeauth/server.go
"\t\tgood = good || ok && same(got, secret)"
"\t\tgood = good || ok && (same(got, secret) || true)"
./nodeauth
TestBootstrap

API: the reads open without OpenReads
apiauth/router.go
"\t\tif access == Public || access == NeedRead && rt.OpenReads {"
"\t\tif access == Public || access == NeedRead {"
./controller
TestAPIScopes|TestAPIReadsNeedTokenOffLoopback

API: a token let through out of its scope
apiauth/router.go
"\t\tcase known && (access == Node || !tok.Scope.Allows(need)):"
"\t\tcase known && (access == Node || !tok.Scope.Allows(need) && false):"
./controller
TestAPIScopes|TestDemandTokenCannotTakeANode

API: every scope allows everything
apiauth/scope.go
"func (s Scope) Allows(need Scope) bool { return s == need || s == Operator }"
"func (s Scope) Allows(need Scope) bool { return true }"
./controller
TestAPIScopes|TestDemandTokenCannotTakeANode

API: an API token speaks for a node
apiauth/router.go
"\t\tcase known && (access == Node || !tok.Scope.Allows(need)):"
"\t\tcase known && !tok.Scope.Allows(need):"
./controller
TestAPIScopes|TestDemandTokenCannotTakeANode

API tokens: a rotated-out secret good past its grace
apiauth/tokens.go
"h != r.Previous || now.Before(r.PreviousUntil)"
"true"
./apiauth
TestTokensLifecycle

API tokens: a revoked token still good
apiauth/tokens.go
"\tdelete(t.byHash, r.Hash)\n\tdelete(t.byHash, r.Previous)\n\tt.mu.Unlock()"
"\tt.mu.Unlock()"
./apiauth ./cmd/autoscaler
TestTokensLifecycle|TestTokenRoutes|TestAPITokensCLI

node credential: an operator replaces a good credential without -replace
nodeauth/registry.go
"\tif via == ViaOperator && had && old.Revoked.IsZero() && (replace == \"\" || replace != old.Hash) {"
"\tif false {"
./controller ./cmd/autoscaler
TestOperatorReplacesOnlyWithReason|TestAPITokensCLI

API: plain HTTP off loopback
config/config.go
"\tif c.TLS() || c.Insecure || Loopback(addr) {"
"\tif true {"
./config
TestListenSecurity|TestParseErrors

node credential: a gone instance's credential kept
controller/gone.go
"\tif len(unseen) > 0 && c.creds != nil {"
"\tif false && len(unseen) > 0 && c.creds != nil {"
./controller
TestLivePoolAndGoneCredentials

node credential: a revoked node bootstraps again without its nonce
nodeauth/registry.go
"\t\tcase old.Nonce == \"\" || !same(nonce, old.Nonce):"
"\t\tcase false:"
./nodeauth ./cmd/autoscaler
TestRegistryLifecycle|TestBootstrap|TestDeployOnAWS

node credential: a credential in grace rotates
nodeauth/registry.go
"\tif !current {\n\t\treturn state.Credential{}, refuse(http.StatusUnauthorized, Superseded"
"\tif false {\n\t\treturn state.Credential{}, refuse(http.StatusUnauthorized, Superseded"
./nodeauth
TestRegistryLifecycle

node credential: a lost rotation answer forgotten
agent/credential.go
"\tif err != nil || next == \"\" || next == token {"
"\tif true {"
./agent
TestRotationLostAnswer

node credential: a rotation retried is refused
nodeauth/registry.go
"\tif !current && same(next, c.Hash) {"
"\tif false && !current && same(next, c.Hash) {"
./agent
TestRotationLostAnswer

node credential: a revoked node with no nonce bound bootstraps
nodeauth/registry.go
"\t\tcase old.Nonce == \"\" || !same(nonce, old.Nonce):"
"\t\tcase old.Nonce != \"\" && !same(nonce, old.Nonce):"
./nodeauth
TestBootstrap|TestRegistryLifecycle

a fleet limit not applied to the baselines (simulate)
simulate/nodes.go
"\t\tif r := max(0, (m-gpus)/p.spec.GPUsPerNode); r < n {"
"\t\tif r := max(0, (m-gpus)/p.spec.GPUsPerNode); false && r < n {"
./simulate
TestSameLimitsForEveryPolicy

headroom removes an empty node its buffer keeps (simulate)
simulate/policy.go
"n.free == n.gpn && spare >= n.gpn && r.unneeded(e, n)"
"n.free == n.gpn && r.unneeded(e, n)"
./simulate
TestHeadroomKeepsItsBuffer

reserved nodes (and pool mins) scaled in by the reactive policy (simulate)
simulate/policy.go
"p.spec.Capacity != fleet.Reserved && p.count > p.spec.Min &&"
"p.count > 0 &&"
./simulate
TestEveryPolicyHoldsTheReservations

reactive removes the empty nodes a waiting wide job counts on (simulate)
simulate/policy.go
"spare := max(0, empty-e.queuedGPUs) + frag - r.buffer"
"spare := empty + frag - r.buffer"
./simulate
TestReactiveWideJobsFinish

the oracle not kept to the fleet's limits (simulate)
simulate/oracle.go
"\t\t\tgpuRoom = max(0, lim.MaxGPUs-rg)\n"
"\t\t\tgpuRoom = max(0, lim.MaxGPUs-rg) + 1<<20\n"
./simulate
TestSameLimitsForEveryPolicy

a refused launch not backed off (loop)
loop/loop.go
"\t\t\t\tif err := backOff(a.Pool, err.Error(), providers.OutOfCapacity(err)); err != nil {"
"\t\t\t\tif err := error(nil); err != nil {"
./loop ./controller
TestLaunchBooks|TestRunCycleOutcomes

a drain heard before it is in the books (loop)
loop/loop.go
"\t\t\tif err = l.o.Books.PutDrain(d); err == nil {\n\t\t\t\terr = f.Drain(ctx, d)\n\t\t\t}"
"\t\t\tif err = f.Drain(ctx, d); err == nil {\n\t\t\t\terr = l.o.Books.PutDrain(d)\n\t\t\t}"
./loop
TestActBooks

the step in progress left out of the forecast (loop)
loop/history.go
"\tif h.cur.IsZero() {\n\t\treturn s\n\t}"
"\tif true {\n\t\treturn s\n\t}"
./loop
TestHistory

the provisional last value followed as final (forecast)
forecast/calibrate.go
"\t\tb.members[i] = extendInPlace(m, y[:len(y)-1])\n\t\tfs[i] = extendInPlace(b.members[i], y).Forecast(len(y), o.h)"
"\t\tb.members[i] = m.Extend(y)\n\t\tfs[i] = b.members[i].Forecast(len(y), o.h)"
./forecast
TestOnlineProvisionalLast

a drain heard at once in simulate, not with the next report (one loop)
simulate/predictive.go
"\t\tn.drainRec = f.e.now\n\t\tf.p.told = append(f.p.told, n)"
"\t\tn.drainRec, n.heardAt = f.e.now, f.e.now\n\t\tf.e.drain(n)"
./simfleet
TestOneLoopTwoWorlds

a cancelled drain never reaches the simulated agent (simfleet, one loop)
simfleet/simfleet.go
"\t\t\tdelete(f.draining, a.node)\n\t\t\tf.cluster.Undrain(a.node)"
"\t\t\tdelete(f.draining, a.node)"
./simfleet
TestOneLoopTwoWorlds

a job finished while queued stays queued (simulate cluster)
simulate/cluster.go
"\t\t\theap.Remove(h, i)\n"
""
./simulate
TestCluster

a spot notice not reported to the predictive policy (simulate)
simulate/predictive.go
"\t\t\t\tfn.InterruptAt = p.at(n.interruptAt)\n"
""
./simulate
TestObserveAsTheController

a quantile switched on its calibration loss alone (forecast)
forecast/blend.go
"if mean < -z*se && mean < best {"
"if z*se >= 0 && mean < best {"
./forecast
TestSwitchLevelsNeedsEvidence

a level's quantile taken from the point forecast's candidate (forecast)
forecast/blend.go
"b.offsets[k][j] = offsets[levelBy[j][k]][k][j]"
"b.offsets[k][j] = offsets[pointBy[k]][k][j]"
./forecast
TestPickSwitchesATailLevel

a level compared with the first candidate, not the point forecast's (forecast)
forecast/blend.go
"base := cum[def[k]][j]"
"base := cum[0][j]"
./forecast
TestPickSwitchesATailLevel

the forecast before a jump mixed with each step's weights one step early (forecast)
forecast/blend.go
"w := weights[min(k+shift, len(weights)-1)]"
"w := weights[k]"
./forecast
TestJumpHoldsTheBlendMadeBefore

one model chosen for every step of the horizon (forecast)
forecast/blend.go
"\t\t\tfor i, o := range c.starts {\n\t\t\t\tsums[ci] += math.Abs(c.y[o+k] - c.calib[i][k])"
"\t\t\tfor range c.starts {\n\t\t\t\tsums[ci] += c.mae"
./forecast
TestPickPointPerStep

bands made without the daily scale (forecast)
forecast/daily.go
"if season < 2 || n-(season+1) < scaleMinDays*season {"
"if true || season < 2 || n-(season+1) < scaleMinDays*season {"
./forecast
TestBandFollowsTheDay|TestDailyScale

the daily scale made of raw changes, the day's cycle in them (forecast)
forecast/daily.go
"d := math.Abs(y[t] - y[t-1] - (y[t-season] - y[t-season-1]))"
"d := math.Abs(y[t] - y[t-1] + 0*(y[t-season]-y[t-season-1]))"
./forecast
TestDailyScale

the daily scale's window one slot off (forecast)
forecast/daily.go
"s := ((i-w)%season + season) % season"
"s := ((i-w+1)%season + season) % season"
./forecast
TestDailyScaleWindow

the daily scale not clamped (forecast)
forecast/daily.go
"ds.scale[s] = min(max(v, 1/scaleClamp), scaleClamp)"
"ds.scale[s] = v"
./forecast
TestDailyScale

calibration errors not divided by their steps' daily scale (forecast)
forecast/calibrate.go
"(c.y[o+k] - c.calib[i][k]) / sc[i][k]"
"(c.y[o+k] - c.calib[i][k])"
./forecast
TestOffsetsInScaleUnits

calibration errors divided by one step's scale at every step (forecast)
forecast/calibrate.go
"(c.y[o+k] - c.calib[i][k]) / sc[i][k]"
"(c.y[o+k] - c.calib[i][k]) / sc[i][0]"
./forecast
TestBandFollowsTheDay|TestOnlineBandFollowsTheDay|TestOffsetsInScaleUnits

calibration's daily scale half a day off the forecast's (forecast)
forecast/blend.go
"sc[i] = ds.steps(o, h)"
"sc[i] = ds.steps(o+cands[0].season/2, h)"
./forecast
TestBandFollowsTheDay

a level's switch judged on unscaled quantiles (forecast)
forecast/blend.go
"pinball(e-offsets[ci][k][j]*sc[i][k], q)"
"pinball(e-offsets[ci][k][j], q)"
./forecast
TestSwitchLevelsNeedsEvidence

a forecast's offsets not multiplied by its steps' daily scale (forecast)
forecast/blend.go
"\tif b.daily == nil && shift == 0 {\n\t\treturn b.offsets"
"\tif shift == 0 {\n\t\treturn b.offsets"
./forecast
TestBandFollowsTheDay|TestOffsetsFromShift

the controller's forecaster without the daily scale (forecast)
forecast/calibrate.go
"holdJump(b, y, o.h, o.levels, b.quantiles(fs, 0, b.offsetsFrom(len(y), 0)))"
"holdJump(b, y, o.h, o.levels, b.quantiles(fs, 0, b.offsets))"
./forecast
TestOnlineBandFollowsTheDay

the controller's forecaster's daily scale half a day off (forecast)
forecast/calibrate.go
"holdJump(b, y, o.h, o.levels, b.quantiles(fs, 0, b.offsetsFrom(len(y), 0)))"
"holdJump(b, y, o.h, o.levels, b.quantiles(fs, 0, b.offsetsFrom(len(y)+72, 0)))"
./forecast
TestOnlineBandFollowsTheDay

the band before a jump scaled from the jump's origin (forecast)
forecast/jump.go
"b.offsetsFrom(len(y)-1, 1)"
"b.offsetsFrom(len(y), 1)"
./forecast
TestJumpBandScaledFromItsOrigin

the band before a jump not shifted a step (forecast)
forecast/jump.go
"b.offsetsFrom(len(y)-1, 1)"
"b.offsetsFrom(len(y)-1, 0)"
./forecast
TestJumpBandScaledFromItsOrigin

the daily scale made through a value that is not a number (forecast)
forecast/daily.go
"\t\tif math.IsNaN(d) || math.IsInf(d, 0) {\n\t\t\tcontinue"
"\t\tif false {\n\t\t\tcontinue"
./forecast
TestDailyScale

a step's daily scale its own, not the changes' up to it (forecast)
forecast/daily.go
"out[k] = math.Sqrt(sq / float64(k+1))"
"out[k] = s + 0*sq"
./forecast
TestDailyScaleSteps

scoped demand served outside its scope
planner/launch.go
"\t\t\tif d.Serves(pp.spec) {"
"\t\t\tif true {"
./planner
TestScopedDemand|TestPropertySafety

a scoped pool's free GPUs drained
planner/scalein.go
"(pp.claimed == 0 || pp.free() >= gpn)"
"true"
./planner
TestScopedDemand

scoped demand's free GPUs counted again fleet-wide
planner/launch.go
"\t\t\tt.scopedFree += c\n"
""
./planner
TestScopedDemand

an infinite number in a config accepted
config/parse.go
"huge = huge || bf.IsInf() || "
"huge = huge || "
./config
TestParseErrors

pending jobs served by busy nodes' fragments
planner/planner.go
"\t\treturn p.plan.Capacity.FragmentGPUs"
"\t\treturn 0"
./planner
TestShapes

busy nodes drained whatever their jobs' room
planner/scalein.go
"c.blocker.none() && !p.placeElsewhere(s.t, pp, c) {"
"c.blocker.none() && false {"
./planner
TestShapes

a node that took moved jobs drained in the same plan
planner/scalein.go
"\tcase c.slot >= 0 && pl.slots[c.slot].given:"
"\tcase false:"
./planner
TestScaleInKeepsWhereJobsMove

scale-in keeps for a lower quantile than launch buys
planner/planner.go
"\t\t\tq = max(q, pp.q)"
"\t\t\tq = min(max(q, pp.q), 0.95)"
./planner
TestQuantileByCost

crossing quantiles left crossed
planner/forecast_input.go
"\t\t\tif f.Values[k][h] < f.Values[k-1][h] {"
"\t\t\tif false {"
./planner
TestForecastCrossing

moved jobs take the empty nodes pending jobs count on
planner/scalein.go
"pl.fits(c.slot, c.node.Jobs, p.plan.Demand.PendingGPUs > 0)"
"pl.fits(c.slot, c.node.Jobs, false)"
./planner
TestMovesKeepScopedClaims

scale-in does not wait after a launch
planner/scalein.go
"if why := p.scaleInDelay(pp); why != \"\" {"
"if why := p.scaleInDelay(pp); false && why != \"\" {"
./planner ./cmd/autoscaler
TestScaleInWaits|TestRunScaleInWaits|TestPropertySafety

a node idle a moment is drained
planner/scalein.go
"&& !c.node.Rebalance && p.idleTooShort(c.node) {"
"&& !c.node.Rebalance && false {"
./planner ./cmd/autoscaler
TestScaleInWaits|TestRunScaleInWaits|TestPropertySafety

a dip of demand is scaled in at once
planner/scalein.go
"if peak := p.recentPeak(); peak > keep {"
"if peak := p.recentPeak(); false {"
./planner
TestScaleInWaits|TestPropertySafety

reservation advice on hours of history
planner/baseline.go
"\tif span < minHistory {"
"\tif false {"
./planner
TestRecommendBaseline

a stale API token taken for a bootstrap
apiauth/router.go
"case (access == Node || access == Bootstrap) && !IsAPIToken(bearer):"
"case access == Node || access == Bootstrap:"
./controller
TestAPIScopes

a socket user registers another user's process
agent/peer.go
"\tif !c.restricted {\n\t\treturn nil\n\t}\n\towner := a.cfg.ProcOwner"
"\tif true {\n\t\treturn nil\n\t}\n\towner := a.cfg.ProcOwner"
./agent ./cmd/autoscaler
TestCallerLimits|TestRegisterAsJobUser

a socket user ends another user's job
agent/peer.go
"\tif c.restricted && j.owner != c.uid {"
"\tif false {"
./agent ./cmd/autoscaler
TestCallerLimits|TestRegisterAsJobUser

a forecast fault logged below the default level
controller/controller.go
"\t\t\tc.log.Warn(\"forecast not used as given\""
"\t\t\tc.log.Info(\"forecast not used as given\""
./controller
TestForecastFaultLogged

announced demand not provisioned
planner/forecast_input.go
"p.plan.Demand.Total()+p.stranded()+ahead, ReasonDemandNow"
"p.plan.Demand.Total()+p.stranded(), ReasonDemandNow"
./planner
TestAnnounced

every pool at one quantile whatever its price
fleet/settings.go
"\treturn min(max(wait/(wait+idle), MinCostQuantile), MaxCostQuantile)"
"\treturn 0.9"
./fleet
TestQuantileFor

advice: a burst in one half of the history reserved
planner/baseline.go
"best = max(cur, min(whole, lo))"
"best = max(cur, whole)"
./planner
TestBaselineBurstyStart

advice: shrunk on one calm half
planner/baseline.go
"best = min(cur, max(whole, hi))"
"best = min(cur, max(whole, 0*hi))"
./planner
TestBaselineBurstyStart

advice: busy reserved nodes counted whole, idle ones not
loop/loop.go
"\t\tcase res < 0:\n\t\t\tbought += gpn"
"\t\tcase res < 0 || u > 0:\n\t\t\tbought += gpn"
./loop
TestHeld

advice: on demand, not on what the fleet held
planner/planner.go
"advisedOn := in.State.Held\n"
"advisedOn := in.State.History\n"
./loop
TestHeld

expected end counted after it passed
planner/forecast_input.go
"\t\tif !e.After(now) {\n\t\t\treturn time.Time{}, false"
"\t\tif e.IsZero() {\n\t\t\treturn time.Time{}, false"
./planner
TestExpectedEnds

expected ends lower what scale-in keeps
planner/forecast_input.go
"return p.need(v, from, to, 0)"
"return p.need(v, from, to, p.endingFor(to))"
./planner
TestExpectedEnds

expected end of a silent node counted
planner/observe.go
"\t\t\t\tc.slot = t.placement.add(pp, free, gpn)\n\t\t\t\tif at, ok"
"\t\t\t\tc.slot = t.placement.add(pp, free, gpn)\n\t\t\t}\n\t\t\t{\n\t\t\t\tif at, ok"
./planner
TestExpectedEnds

expected ends beyond the pending GPUs
planner/forecast_input.go
"return min(freed, pending)"
"return freed"
./planner
TestExpectedEnds

expected ends after a lead time of waiting
planner/forecast_input.go
"!since.IsZero() && p.now.Sub(since) >= t.Sub(p.now)"
"false && !since.IsZero() && p.now.Sub(since) >= t.Sub(p.now)"
./planner
TestExpectedEnds

expected end of a free node counted
planner/observe.go
"expectedEmpty(n, p.now); ok && free < gpn {"
"expectedEmpty(n, p.now); ok {"
./planner
TestExpectedEnds

expected ends standing in for scoped demand
planner/forecast_input.go
"pending := p.plan.Demand.PendingGPUs - p.scopedPending"
"pending := p.plan.Demand.PendingGPUs"
./planner
TestExpectedEnds

faster pool counted on beyond what it held since its refusal
planner/launch.go
"\t\tif c.status.Refused {\n"
"\t\tif false {\n"
./planner
TestLeftToFaster

faster pool counted on while backed off
planner/launch.go
"c.spec.PricePerGPUHour() >= pp.spec.PricePerGPUHour() || !p.unavailable(c).none() {"
"c.spec.PricePerGPUHour() >= pp.spec.PricePerGPUHour() {"
./planner
TestLeftToFaster

a pool no cheaper counted on
planner/launch.go
"c.spec.PricePerGPUHour() >= pp.spec.PricePerGPUHour() || "
""
./planner
TestLeftToFaster

left demand noted unmet
planner/launch.go
"p.have(t, at) - pp.left; gap > short {"
"p.have(t, at); gap > short {"
./planner
TestLeftToFaster

refusal forgotten at a successful launch
loop/loop.go
"\t\t\t\terr = followUp(l.launched(a.Pool))"
"\t\t\t\terr = followUp(l.o.Books.DeleteBackoff(a.Pool))"
./loop
TestLaunchBooks

held since refusal not recorded
loop/loop.go
"\t\t\tif n := nodes[ps.Name]; n > b.Held && !ps.IsUnobserved() {"
"\t\t\tif n := nodes[ps.Name]; false && n > b.Held {"
./loop
TestLaunchBooks

refusal never forgotten
loop/loop.go
"if !now.Before(b.Until) && now.Sub(refused) >= RefusalMemory {"
"if false {"
./loop
TestLaunchBooks

never-read pool not counted at its max (planner property)
planner/observe.go
"\t\tif pp.status.NeverRead() {\n\t\t\t// Its size is unknown"
"\t\tif false {\n\t\t\t// Its size is unknown"
./planner
TestPropertySafety|TestNeverReadCountsAtMax

never-read pool launched into (planner property)
planner/launch.go
"\tcase pp.status.IsUnobserved():\n\t\treturn cause{ReasonPoolUnobserved, unobserved(pp)}"
"\tcase pp.status.IsUnobserved() && !pp.status.NeverRead():\n\t\treturn cause{ReasonPoolUnobserved, unobserved(pp)}"
./planner
TestPropertySafety|TestNeverReadCountsAtMax

launch failing terminated even when not ours (planner property)
planner/observe.go
"n.LaunchFailing != \"\" && !n.Unknown && len(n.Jobs) == 0; failing"
"n.LaunchFailing != \"\" && len(n.Jobs) == 0; failing"
./planner
TestPropertySafety|TestPlanScenarios

launch failing terminated with jobs on it (planner property)
planner/observe.go
"n.LaunchFailing != \"\" && !n.Unknown && len(n.Jobs) == 0; failing"
"n.LaunchFailing != \"\" && !n.Unknown; failing"
./planner
TestPropertySafety

launch failing waited for until the deadline (planner)
planner/observe.go
"n.LaunchFailing != \"\" && !n.Unknown && len(n.Jobs) == 0; failing"
"false; failing"
./planner
TestPlanScenarios

a GCP stockout in the last attempt not reported on the instance
providers/gcp/mig.go
"\t\t\tin.Failing = lastAttempt(g, mi)\n"
"\n"
./providers/gcp
TestMIGStockoutFailing

left to a faster pool beyond max_gpus (planner)
planner/launch.go
"\t\t\troom = min(room, (m-t.fleetGPUs-t.deferredGPUs)/gpn)\n"
"\n"
./planner
TestLeftToFaster

a busy group remembered as a refusal (loop)
loop/loop.go
"\tif outOfCapacity {\n\t\tb.Refused, b.Held = now, 0\n\t}"
"\tb.Refused, b.Held = now, 0"
./loop
TestBusyIsNoRefusal

launches not yet up counted as held since a refusal (loop)
loop/loop.go
"if s := st.Nodes[i].State; s == fleet.Ready || s == fleet.Draining {"
"if true {"
./loop
TestBusyIsNoRefusal

a pool backed off for each failing launch of a cycle (loop)
loop/loop.go
"\t\tif backedOff[pool] {\n\t\t\treturn nil\n\t\t}\n"
""
./loop
TestBackOffOncePerCycle

a GCP identity token for another instance accepted (nodeauth)
nodeauth/server.go
"\tif in.InstanceName != node {"
"\tif false {"
./nodeauth
TestBootstrapGCP

a GCP identity in another project accepted (nodeauth)
nodeauth/server.go
"if in.ProjectID != project || !inZone {"
"if !inZone {"
./nodeauth
TestBootstrapGCP

a GCP identity token from another issuer accepted (nodeauth)
nodeauth/gcp.go
"\tcase !gcpIssuers[p.Issuer]:"
"\tcase false:"
./nodeauth
TestBootstrapGCP

an AWS bootstrap without the secret when GCP is on (nodeauth)
nodeauth/server.go
"\tcase !good:\n"
"\tcase false:\n"
./nodeauth
TestBootstrapGCP

a GCP identity in another zone of a regional pool accepted (nodeauth)
nodeauth/server.go
"inZone = inZone && zone != \"\" && in.Zone == zone\n"
"_ = zone\n"
./nodeauth
TestBootstrapGCP

a provisioning VM's stale stockout taken for a failure (gcp)
providers/gcp/mig.go
"a != \"CREATING_WITHOUT_RETRIES\" || mi.GetInstanceStatus() != \"\" {"
"a != \"CREATING_WITHOUT_RETRIES\" {"
./providers/gcp
TestMIGStockoutFailing

a regional group that moves creations reported failing (gcp)
providers/gcp/mig.go
"\t\tif !moves {"
"\t\tif !moves || true {"
./providers/gcp
TestMIGStockoutMoved

refused credentials taken for an outage at start (gcp)
providers/gcp/facts.go
"errors.As(err, &ne) && ne.Timeout()"
"errors.As(err, &ne)"
./providers/gcp
TestResolveRefusedCredentials

stockouts backed off no longer each time (loop)
loop/loop.go
"\t\tcase !b.Until.IsZero():\n\t\t\tb.Until = time.Time{}"
"\t\tcase !b.Until.IsZero():\n\t\t\tb.Until, b.Failures = time.Time{}, 0"
./loop
TestStockoutBacksOffLonger

a crashed plugin started again at once (plugin)
providers/plugin/supervisor.go
"if now := s.now(); now.Before(s.nextTry) {"
"if now := s.now(); false && now.Before(s.nextTry) {"
./providers/plugin
TestSupervisorRestarts

a plugin's group with min above its target followed (plugin)
providers/plugin/wire.go
"|| g.GetMin() > g.GetTarget() "
""
./providers/plugin
TestGroupFromWire

a plugin's failing reason of any kind followed (plugin)
providers/plugin/wire.go
"if !providers.OutOfCapacity(in.Failing) || in.State != providers.InstancePending {"
"if false {"
./providers/plugin
TestGroupFromWire

the controller's environment handed to a plugin (plugin)
providers/plugin/client.go
"\t\tSkipHostEnv:      true,\n"
"\t\tSkipHostEnv:      false,\n"
./providers/plugin
TestPluginRoundTrip

a plugin's children left running (plugin)
providers/plugin/proc_linux.go
"\t\tsyscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)"
"\t\t_ = cmd"
./providers/plugin
TestPluginStopped

a plugin pool naming no plugin block accepted (config)
config/decode.go
"if name, at := u.PluginName(); name != \"\" && plugins[name] == nil {"
"if name, at := u.PluginName(); false && plugins[name] == nil {"
./config
TestParseErrors

a plugin's refusal not placed in the file (registry)
providers/registry/registry.go
"at := plugin.Where(d, spec, by[name])"
"at := spec.DefRange"
./cmd/autoscaler
TestPluginPools

a plugin node's identity not checked (nodeauth)
nodeauth/server.go
"\tif err := s.Plugins.VerifyIdentity(ctx, p, node, req.Plugin.Document); err != nil {"
"\tif err := s.Plugins.VerifyIdentity(ctx, p, node, req.Plugin.Document); false && err != nil {"
./nodeauth
TestBootstrapPlugin

a plugin node bootstrapped for a pool of another provider (nodeauth)
nodeauth/server.go
"if !ok || p.Provider != fleet.ProviderPlugin {"
"if !ok {"
./nodeauth
TestBootstrapPlugin

a plugin node's identity without the bootstrap secret (nodeauth)
nodeauth/server.go
"\tcase !good:\n"
"\tcase req.Plugin != nil && req.AWS == nil:\n\t\treturn s.bootstrapPlugin(r, node, req)\n\tcase !good:\n"
./nodeauth
TestBootstrapPlugin

a plugin asked about pools it was not configured with (plugin)
providers/plugin/server.go
"\t\tif !s.pools[p.GetName()] {"
"\t\tif false && !s.pools[p.GetName()] {"
./providers/plugin
TestPluginRoundTrip

the example plugin launching again for servers booting (commands)
examples/plugins/commands/main.go
"\t\tcase stateBooting, stateOn:\n\t\t\tactive++"
"\t\tcase stateOn:\n\t\t\tactive++"
./examples/plugins/commands
TestLaunchAndTerminate

the example plugin powering on past the target (commands)
examples/plugins/commands/main.go
"pick := free[:min(need, len(free))]"
"pick := free"
./examples/plugins/commands
TestLaunchAndTerminate

the example plugin refusing no identity (commands)
examples/plugins/commands/main.go
"\tvar ce *commandError\n\tif errors.As(err, &ce) && ce.exitCode() > 0 && ce.exitCode() != tempFail {"
"\terr = nil\n\tvar ce *commandError\n\tif errors.As(err, &ce) && ce.exitCode() > 0 && ce.exitCode() != tempFail {"
./examples/plugins/commands
TestVerifyIdentity

a plugin's literal-only settings not checked (config)
config/decode_plugin.go
"\t\tif e, ok := a.Expr.(hclsyntax.Expression); ok {"
"\t\tif e, ok := a.Expr.(hclsyntax.Expression); false && ok {"
./config
TestParseErrors

a plugin pool's server powered off losing its credential (controller)
controller/gone.go
"\t\tunseen = slices.DeleteFunc(unseen, c.namesReused)\n"
"\t\tunseen = slices.DeleteFunc(unseen, func(string) bool { return false })\n"
./controller
TestPluginServerKeepsCredential

scale-in keeps for a refused pool's level (keep level)
planner/planner.go
"\t\tif !p.refusing(pp) {\n\t\t\tq = max(q, pp.q)"
"\t\tif true {\n\t\t\tq = max(q, pp.q)"
./planner
TestQuantileByCost

a failing pool's level kept for (keep level failing)
planner/launch.go
"\treturn pp.failing || p.now.Before(pp.status.BackoffUntil)"
"\treturn p.now.Before(pp.status.BackoffUntil)"
./planner
TestQuantileByCost

no level when every pool is refused (keep level all)
planner/planner.go
"\tq = cmp.Or(q, all)\n"
""
./planner
TestQuantileByCost

ending nodes drained like any other (known ends)
planner/scalein.go
"\t\tif !c.endsBy.IsZero() && left > 0"
"\t\tif false && left > 0"
./planner
TestScaleInAtKnownEnds

an end drains a node, checkpointed or not (known ends drain)
planner/scalein.go
"\t\t\tp.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,\n\t\t\t\tCode: ReasonEndsSoon,"
"\t\t\tp.add(Action{Kind: Drain, Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,\n\t\t\t\tCode: ReasonIdle,"
./planner
TestPropertyEndsNeverDrain|TestPropertySafety|TestScaleInAtKnownEnds

an end beyond the window held for (known ends window)
planner/scalein.go
"ok && !at.After(p.now.Add(p.window)) {"
"ok {"
./planner
TestScaleInAtKnownEnds

a held node not counted as gone: another node drained in its place (known ends gone)
planner/scalein.go
"\t\t\tleft--\n\t\t\ts.gone(pp, c)\n\t\t\tcontinue"
"\t\t\tleft--\n\t\t\tcontinue"
./planner
TestScaleInAtKnownEnds

a hold spends the cycle's budget (known ends budget)
planner/scalein.go
"\t\t\tleft--\n\t\t\ts.gone(pp, c)\n"
"\t\t\tleft--\n\t\t\t*budget--\n\t\t\ts.gone(pp, c)\n"
./planner
TestScaleInAtKnownEnds

holds past the pool's share (known ends share)
planner/scalein.go
"if !c.endsBy.IsZero() && left > 0 && (c.slot"
"if !c.endsBy.IsZero() && (c.slot"
./planner
TestScaleInAtKnownEnds

a node given another's jobs held for its ends (known ends given)
planner/scalein.go
" && left > 0 && (c.slot < 0 || !s.t.placement.slots[c.slot].given) {"
" && left > 0 {"
./planner
TestScaleInAtKnownEnds

a node with a young job held (known ends young)
planner/scalein.go
"n.Jobs[i].Start.After(p.now.Add(-p.window))"
"n.Jobs[i].Start.After(p.now)"
./planner
TestScaleInAtKnownEnds

a hold not counted against the pool's floor (known ends floor)
planner/scalein.go
"\t\t\tleft--\n\t\t\ts.gone(pp, c)\n\t\t\tcontinue"
"\t\t\tleft--\n\t\t\ts.gone(pp, c)\n\t\t\tpp.active++\n\t\t\tcontinue"
./planner
TestScaleInAtKnownEnds

ending nodes not first among busy ones (known ends order)
planner/scalein.go
"\t\tif ae, be := !a.endsBy.IsZero(), !b.endsBy.IsZero(); ae != be {"
"\t\tif ae, be := false, false; ae != be {"
./planner
TestScaleInAtKnownEnds

pushed ends not applied (pushed ends)
controller/controller.go
"\t\t\tends.Apply(&n)\n"
"\t\t\t_ = ends\n"
./controller
TestRunningPushEnds

a pushed end later than the agent's (pushed ends earlier)
controller/demand.go
"(j.ExpectedEnd.IsZero() || x.at.Before(j.ExpectedEnd))"
"true"
./controller
TestDemandRunningEnds

a pushed end on any node (pushed ends node)
controller/demand.go
"(x.node == \"\" || x.node == n.ID) && "
""
./controller
TestDemandRunningEnds

pushed ends that never expire (pushed ends ttl)
controller/demand.go
"\t\tif now.Sub(x.at) > p.ttl() {\n\t\t\tdelete(p.running, src)"
"\t\tif false {\n\t\t\tdelete(p.running, src)"
./controller
TestDemandRunningEnds

a pushed end moved later by the next push (pushed ends later)
controller/demand.go
"ok && e.Before(l.ExpectedEnd) {"
"ok && false {"
./controller
TestDemandRunningEnds

a faster, dearer pool buys what ends free (ends wait)
planner/launch.go
"\t\tif p.unavailable(pp).none() && at.After(p.waitUntil) {"
"\t\tif false {"
./planner
TestExpectedEnds|TestPropertyEndsNeverDrain

jobs moved by drains not reported (moved jobs)
simulate/simulate.go
"\t\tMovedJobs:           e.st.saved,\n"
""
./simulate
TestPredictiveNeverLosesWorkToScaleIn

demand history: no fragments while pending (loop)
loop/loop.go
"\treturn min(frag, pending*max(gpn-1, 0))"
"\treturn 0"
./loop
TestDemand|TestDemandIsThePlannersDemandNow|TestRecordedDemandCountsFragments

demand history: no bound on the fragments a pending GPU counts (loop)
loop/loop.go
"\treturn min(frag, pending*max(gpn-1, 0))"
"\treturn frag"
./loop
TestDemand|TestDemandIsThePlannersDemandNow|TestSpreadJobsDoNotRatchet

demand history: fragments in a pending stretch's first cycle (loop)
loop/loop.go
" || st.PendingSince.IsZero() || !st.PendingSince.Before(now) {"
" {"
./loop
TestDemand|TestDemandIsThePlannersDemandNow|TestRecordedDemandCountsFragments|TestSpreadJobsDoNotRatchet

demand history: fragments for GPUs pending for one pool (loop)
loop/loop.go
"\t\tpending -= d.GPUs\n"
"\t\tpending -= d.GPUs * 0\n"
./loop
TestDemand|TestDemandIsThePlannersDemandNow

demand history: GPUs in use counted over the free GPUs (loop)
loop/loop.go
"max(float64(used+countedFragments(pools, st, frag, now)), inUse) + float64(st.PendingGPUs)"
"max(float64(used), inUse) + float64(countedFragments(pools, st, frag, now)+st.PendingGPUs)"
./loop
TestDemand|TestDemandIsThePlannersDemandNow

demand history: the pending stretch reckoned after the record (loop)
loop/loop.go
"\tst.PendingSince = l.pendingSince // the loop's own reckoning, whatever the observation said\n\tif err := l.record(now, obs); err != nil {\n\t\treturn CycleResult{}, err\n\t}\n"
"\tif err := l.record(now, obs); err != nil {\n\t\treturn CycleResult{}, err\n\t}\n\tst.PendingSince = l.pendingSince // the loop's own reckoning, whatever the observation said\n"
./loop
TestRecordedDemandCountsFragments

demand history: an interrupted node's free GPUs as fragments (loop)
planner/observe.go
"used == 0 || interrupted(n, now) {"
"used == 0 {"
./loop
TestDemand

limits: orphans outside the fleet's limits
planner/observe.go
"\t\t\tp.countOutside(t, n)\n"
"\n"
./planner ./controller
TestOrphansCountAgainstLimits|TestOutsideNodesAtTheirDearest|TestOrphansReaped

limits: terminating nodes leave the counts
planner/observe.go
"\t\t\tpp.billed++\n\t\t\tpp.terminating++\n\t\t\tpp.countStuck(t)\n"
"\n"
./planner
TestTerminatingNodesCountUntilGone

limits: products of nodes and GPUs wrap
fleet/saturate.go
"\tif a > math.MaxInt/b {"
"\tif false {"
./planner
TestAbsurdForecastAtTheConfigBound

config: a pool's max unbounded
config/decode_pool.go
"d.between(\"max\", b.Max, 1, MaxPoolNodes, b.MaxAt)"
"d.between(\"max\", b.Max, 1, math.MaxInt, b.MaxAt)"
./config
TestParseErrors

partition: booted launches terminated while scale-in is halted
planner/observe.go
"\tif n.Booted && (p.plan.ScaleInHalt"
"\tif false && n.Booted && (p.plan.ScaleInHalt"
./planner ./controller
TestBootedLaunchHeldWhileHalted|TestPartitionHoldsBootedLaunches

partition: no hold after the halt ends
planner/observe.go
"p.plan.ScaleInHalt != \"\" || !halted.IsZero() && p.now.Before(until)"
"p.plan.ScaleInHalt != \"\""
./planner ./controller
TestBootedLaunchHeldWhileHalted|TestPartitionHoldsBootedLaunches

GPU fault: the agent confirms a drain from a stale reading
agent/report.go
"\ta.gpusRead = healthy"
"\ta.gpusRead = a.gpusRead || healthy"
./agent
TestNoSafeDrainWhileGPUsUnread

GPU fault: a draining node terminated while its GPUs cannot be read
planner/observe.go
"\tcase n.GPUFault != \"\":\n\t\t// Nobody sees"
"\tcase false:\n\t\t// Nobody sees"
./planner ./controller
TestDrainedNodeWithGPUFaultHeld|TestUnreadableGPUsNeverIdle|TestPropertySafety

oracle: a scale-in budget of the whole pool
planner/scalein.go
"\treturn max(1, int(math.Floor(lim.ScaleInShare*float64(size)+1e-9)))"
"\treturn max(1, int(math.Floor(float64(size)+1e-9)))"
./planner
TestPropertySafety

oracle: the fleet's size a thousand times too large
fleet/settings.go
"\t\treturn s.Limits.MaxGPUs\n\t}\n\treturn total"
"\t\treturn s.Limits.MaxGPUs * 1000\n\t}\n\treturn total * 1000"
./fleet ./planner
TestMaxFleetGPUs|TestPropertySafety

oracle: a report about another node taken
controller/reports/receiver.go
"\tif rep.Node != node {"
"\tif false {"
./controller/reports ./controller
TestReceiver|TestReportOnlyAboutOwnNode

partition: a pool holding booted launches buys more
planner/launch.go
"\tcase pp.holding > 0:"
"\tcase false:"
./planner ./controller
TestBootedLaunchHeldWhileHalted|TestPartitionHoldsBootedLaunches|TestPropertySafety

recreate: a VM under the name outside the group bootstraps
nodeauth/server.go
"listed != \"\" && listed != in.InstanceID {"
"false {"
./nodeauth
TestBootstrapGCP

recreate: an older machine takes the name back
nodeauth/registry.go
"m.Created.After(cmp.Or(old.InstanceCreated, old.Registered))"
"m.Created.After(cmp.Or(time.Time{}, time.Time{}))"
./nodeauth
TestBootstrapRecreatedMachine|TestBootstrapGCP

gone: a node briefly unlisted is forgotten at once
controller/gone.go
"\t\tcase now.Sub(since) < GoneGrace:"
"\t\tcase now.Sub(since) < 0:"
./controller
TestBrieflyUnlistedNodeRemembered

limits: stopped nodes counted
planner/observe.go
"stopped := n.State == fleet.Terminating && n.Stopped"
"stopped := false && n.Stopped"
./planner
TestStoppedNodesCountNothing
EOF
}

failed=0 ran=0
declare -A baseline # "pkgs|run" -> ok or the reason the named tests fail unmutated
while IFS= read -r name && IFS= read -r file && IFS= read -r old && IFS= read -r new && IFS= read -r pkgs && IFS= read -r run; do
  # The blank line between mutants: anything else means a record of the
  # catalogue is not six lines, and every record after it would be read
  # askew.
  if IFS= read -r sep && [ -n "$sep" ]; then
    echo "the catalogue is malformed: the record \"$name\" is followed by \"$sep\", not a blank line" >&2
    exit 2
  fi
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  ran=$((ran + 1))
  rm -rf "$work/tree" "$work/shared" && mkdir -p "$work/tree"
  # The tree as it is, uncommitted files included.
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/tree" 2>/dev/null || true
  [ -d ../shared ] && ln -s "$(cd ../shared && pwd)" "$work/shared"
  # The named tests must pass on the tree unmutated: a test that fails
  # already would make every mutant look killed.
  key="$pkgs|$run"
  if [ -z "${baseline[$key]:-}" ]; then
    if (cd "$work/tree" && go test -count=1 -run "^(${run})\$" $pkgs >"$work/base" 2>&1); then
      baseline[$key]=ok
    else
      baseline[$key]="$(grep -m1 -E -- '--- FAIL|panic:|build failed|cannot|undefined' "$work/base" | cut -c1-160)"
    fi
  fi
  if [ "${baseline[$key]}" != ok ]; then
    echo "BROKEN    $name: go test $pkgs -run $run fails unmutated: ${baseline[$key]}"
    failed=$((failed + 1))
    continue
  fi
  if ! python3 - "$work/tree/$file" "$old" "$new" <<'PY'
import ast, sys
path, old, new = sys.argv[1], ast.literal_eval(sys.argv[2]), ast.literal_eval(sys.argv[3])
src = open(path).read()
if src.count(old) != 1:
    sys.exit(f"{path}: the code to replace occurs {src.count(old)} times, want 1 (update scripts/mutants.sh)")
open(path, "w").write(src.replace(old, new))
PY
  then echo "NOT MADE  $name"; failed=$((failed + 1)); continue; fi
  if (cd "$work/tree" && go test -count=1 -run "^(${run})\$" $pkgs >"$work/out" 2>&1); then
    echo "SURVIVED  $name: go test $pkgs -run $run passes"
    failed=$((failed + 1))
    continue
  fi
  # A kill is a named test failing on an assertion: not a build error, a
  # panic or a timeout, which say nothing of the rule.
  # (rapid's own log lines, its draws and fail files, are no assertion)
  assertion=$(grep -E '^\s+\S+_test\.go:[0-9]+: ' "$work/out" | grep -v '\[rapid\]' | head -n 1 | sed 's/^\s*//' | cut -c1-150 || true)
  if grep -q -E '\[build failed\]|\[setup failed\]' "$work/out"; then
    echo "NOT BUILT $name: $(grep -m1 -E 'error|cannot|undefined' "$work/out" | cut -c1-160)"
    failed=$((failed + 1))
  elif grep -q -E '^panic: |test timed out after' "$work/out"; then
    echo "NOT KILLED $name: the tests panicked or timed out, no assertion failed: $(grep -m1 -E '^panic: |test timed out' "$work/out" | cut -c1-150)"
    failed=$((failed + 1))
  elif ! grep -q -- '--- FAIL' "$work/out" || [ -z "$assertion" ]; then
    echo "NOT KILLED $name: go test failed with no failed assertion: $(tail -n 3 "$work/out" | tr '\n' ' ' | cut -c1-160)"
    failed=$((failed + 1))
  else
    echo "killed    $name: $assertion"
  fi
done < <(mutants)
[ "$ran" -gt 0 ] || { echo "no mutant's name contains \"$only\""; exit 1; }
[ "$failed" -eq 0 ] || { echo "$failed mutant(s) survived, broke, or were not made, built or killed by an assertion"; exit 1; }
echo "every mutant killed by an assertion, each named test passing unmutated"
