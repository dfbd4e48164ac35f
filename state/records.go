package state

import "time"

// Records is every record the controller keeps, read and written through
// one interface. Two implementations hold them: *Store, the bbolt file
// `run` keeps in controller.state_dir, and *Memory, for `simulate` (which
// replays months and needs no durability) and for tests. A later etcd
// implementation is to hold them for a controller run highly available.
//
// Each group of methods names its record and the package that owns it
// (the one that writes it). Closing is not a record: whoever opens a
// store closes it.
type Records interface {
	// Path names where the records are kept: the state file's path, or
	// "memory".
	Path() string

	// The demand history, one series per name (loop.DemandSeries,
	// loop.HeldSeries): owned by package loop, which records each cycle's
	// sample, prunes it and imports histories into steps not recorded
	// (loop.Import).
	AppendDemand(series string, samples ...Sample) error
	Demand(series string, since time.Time) ([]Sample, error)
	LatestDemand(series string) (x Sample, ok bool, err error)
	DemandSeries() ([]string, error)
	PruneDemand(before time.Time) (int, error)
	FillDemand(series string, step time.Duration, samples ...Sample) (added []Sample, kept int, err error)

	// The pools' back-offs: owned by package loop.
	PutBackoff(b Backoff) error
	DeleteBackoff(pool string) error
	Backoffs() ([]Backoff, error)

	// The drains in progress and the drain log of drains begun: owned by
	// package loop.
	PutDrain(d Drain) error
	DeleteDrain(node string) error
	Drains() ([]Drain, error)
	DrainLog(since time.Time) ([]Drain, error)
	PruneDrainLog(before time.Time) (int, error)

	// When scale-in was last found halted: owned by package loop.
	PutHalted(t time.Time) error
	Halted() (time.Time, error)

	// The journal of intents: owned by package actuator.
	PutIntent(in Intent) error
	DoneIntent(key string) error
	Intents() ([]Intent, error)

	// The launch records (SettleLaunch also clears the launch's intent):
	// owned by package actuator.
	SettleLaunch(l Launch) error
	PutLaunches(ls ...Launch) error
	DeleteLaunches(keys ...string) error
	Launches() ([]Launch, error)

	// When each node was first seen in its cloud: owned by package
	// actuator.
	PutSeen(t time.Time, nodes ...string) error
	DeleteSeen(nodes ...string) error
	SeenNodes() ([]NodeTime, error)

	// When each node first reported healthy GPUs: owned by package
	// controller.
	PutReady(t time.Time, nodes ...string) error
	DeleteReady(nodes ...string) error
	ReadyNodes() ([]NodeTime, error)

	// The nodes whose last drain was cancelled: owned by package
	// controller.
	PutCancelled(node string, t time.Time) error
	DeleteCancelled(node string) error
	CancelledDrains() ([]Cancelled, error)

	// The pools' last config: owned by package controller.
	PutPools(pools ...PoolRecord) error
	Pools() ([]PoolRecord, error)

	// The fleet the records belong to: owned by package controller.
	ClaimFleet(name string) error

	// The nodes' credentials: owned by package nodeauth.
	PutCredential(c Credential) error
	DeleteCredentials(nodes ...string) error
	Credentials() ([]Credential, error)

	// Who used what: the usage hours per team and tier, and the job
	// records, pruned by their retentions: owned by package controller.
	PutUsage(hours []UsageHour, jobs []UsageJob) error
	UsageHours(from, to time.Time) ([]UsageHour, error)
	UsageJobs(from, to time.Time) ([]UsageJob, error)
	PruneUsage(hoursBefore, jobsBefore time.Time) (int, error)

	// What the leader last showed of its reads, for the other replicas
	// to serve: owned by package controller.
	PutViews(views ...View) error
	Views() ([]View, error)

	// The API tokens: owned by package apiauth.
	PutAPIToken(t APIToken) error
	DeleteAPIToken(name string) error
	APITokens() ([]APIToken, error)
}

var _ Records = (*Store)(nil)
var _ Records = (*Memory)(nil)
