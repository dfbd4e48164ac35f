package state

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Memory is Records in memory, for runs that need no durability (the
// simulator replays months in seconds) and for tests. Its checks and
// errors are the Store's: what the Store refuses, Memory refuses, and
// nothing is written by a call that fails. It reads back what the Store
// would: demand sample times in UTC, none before 1970 (as the Store's keys
// count them); every other time as the Store's JSON reads it back (no
// monotonic clock reading; a zone other than UTC or Local as a fixed
// offset); lists in the Store's order. Nothing
// survives the process. Its methods are safe for concurrent use. The zero
// value is empty and ready to use.
type Memory struct {
	mu    sync.Mutex
	views map[string]View
	// demand is each series' samples, by time, with their times as the
	// Store reads them back (sampleTime); a series pruned empty stays
	// named, as the Store's bucket does.
	demand map[string][]Sample
	// backoffs are by pool; a write replaces the slice, never an element
	// of it, so a slice Backoffs returned stays as it was.
	backoffs []Backoff
	drains   map[string]Drain
	// log is the drain log, by start and then node (the Store's key
	// order); a write appends to it or replaces it, so a slice DrainLog
	// returned stays as it was.
	log       []Drain
	halted    time.Time
	intents   map[string]Intent
	launches  map[string]Launch
	seen      map[string]NodeTime
	ready     map[string]NodeTime
	cancelled map[string]NodeTime
	pools     map[string]PoolRecord
	creds     map[string]Credential
	tokens    map[string]APIToken
	// usageHours and usageJobs are the usage records by their Store keys.
	usageHours map[string]UsageHour
	usageJobs  map[string]UsageJob
	// fleet is the name ClaimFleet recorded, if claimed.
	fleet   string
	claimed bool
}

// memoryPath is what Memory.Path returns and its errors name.
const memoryPath = "memory"

// Path is "memory": the records are kept in no file.
func (m *Memory) Path() string { return memoryPath }

// wall is t as a record read back from the Store's JSON has it: less its
// monotonic clock reading, and in UTC, Local or a fixed zone of its
// offset, as time.Time's JSON reads it back. A time in UTC, the common
// case, costs no formatting.
func wall(t time.Time) time.Time {
	if t.Location() == time.UTC {
		return t.Round(0)
	}
	if w, err := time.Parse(time.RFC3339Nano, t.Format(time.RFC3339Nano)); err == nil {
		return w
	}
	return t.Round(0)
}

// sampleKey is the Store's key of a demand sample at t: nanoseconds since
// 1970, times before 1970 counting as 1970.
func sampleKey(t time.Time) int64 { return max(t.UnixNano(), 0) }

// sampleTime is a sample's time as the Store reads it back from its key.
func sampleTime(t time.Time) time.Time { return time.Unix(0, sampleKey(t)).UTC() }

// finite checks demand samples' values as the Store does.
func finite(series string, samples []Sample) error {
	for _, x := range samples {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			return fmt.Errorf("state: demand %s at %s is %v", series, x.Time.UTC().Format(time.RFC3339), x.Value)
		}
	}
	return nil
}

// searchSample is the index of the first of xs at or after key.
func searchSample(xs []Sample, key int64) int {
	return sort.Search(len(xs), func(i int) bool { return xs[i].Time.UnixNano() >= key })
}

// putSample records x in xs, by time, replacing a sample at its time.
func putSample(xs []Sample, x Sample) []Sample {
	x.Time = sampleTime(x.Time)
	k := x.Time.UnixNano()
	if n := len(xs); n == 0 || xs[n-1].Time.UnixNano() < k {
		return append(xs, x) // the common case: a cycle's sample, after the last
	}
	i := searchSample(xs, k)
	if xs[i].Time.UnixNano() == k {
		xs[i] = x
		return xs
	}
	return slices.Insert(xs, i, x)
}

// series is the named series' samples, naming it if it was not.
func (m *Memory) series(name string) []Sample {
	if m.demand == nil {
		m.demand = map[string][]Sample{}
	}
	xs, ok := m.demand[name]
	if !ok {
		m.demand[name] = nil
	}
	return xs
}

// AppendDemand records demand samples of the named series. A sample at a
// time already recorded replaces it. NaN and infinite values are refused,
// and then nothing is recorded.
func (m *Memory) AppendDemand(series string, samples ...Sample) error {
	if series == "" {
		return errors.New("state: demand series with no name")
	}
	if err := finite(series, samples); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	xs := m.series(series)
	for _, x := range samples {
		xs = putSample(xs, x)
	}
	m.demand[series] = xs
	return nil
}

// Demand returns the named series' samples at or after since, oldest
// first, in a slice of the caller's; none if the series was never
// recorded.
func (m *Memory) Demand(series string, since time.Time) ([]Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	xs := m.demand[series]
	i := searchSample(xs, sampleKey(since))
	if i == len(xs) {
		return nil, nil
	}
	return slices.Clone(xs[i:]), nil
}

// LatestDemand returns the named series' newest sample; ok is false when
// the series holds none.
func (m *Memory) LatestDemand(series string) (x Sample, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	xs := m.demand[series]
	if len(xs) == 0 {
		return Sample{}, false, nil
	}
	return xs[len(xs)-1], true, nil
}

// DemandSeries lists the names of the recorded demand series, sorted.
// A series stays named once recorded, even when pruned empty, as in the
// Store.
func (m *Memory) DemandSeries() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.demand) == 0 {
		return nil, nil
	}
	return slices.Sorted(maps.Keys(m.demand)), nil
}

// PruneDemand deletes every series' samples before t and returns how many
// it deleted.
func (m *Memory) PruneDemand(before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, end := 0, sampleKey(before)
	for name, xs := range m.demand {
		i := searchSample(xs, end)
		if i == len(xs) {
			m.demand[name] = nil
		} else {
			// The rest stays in its array; append moves it to a new one
			// when it fills, so a sliding history costs no copy a cycle.
			m.demand[name] = xs[i:]
		}
		n += i
	}
	return n, nil
}

// FillDemand records those of the samples of the named series whose step
// holds no sample yet, and leaves the others out: what is recorded wins,
// as in Store.FillDemand (steps counted as time.Time.Truncate counts
// them; a second sample of one step in the same call is left out). It
// returns the samples it added, in the order given, and how many it left
// out. NaN and infinite values are refused, and then nothing is recorded.
func (m *Memory) FillDemand(series string, step time.Duration, samples ...Sample) (added []Sample, kept int, err error) {
	switch {
	case series == "":
		return nil, 0, errors.New("state: demand series with no name")
	case step <= 0:
		return nil, 0, fmt.Errorf("state: filling demand %s: step %v, want a positive step", series, step)
	}
	if err := finite(series, samples); err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	xs := m.series(series)
	for _, x := range samples {
		from := x.Time.Truncate(step)
		if i := searchSample(xs, sampleKey(from)); i < len(xs) && xs[i].Time.UnixNano() < sampleKey(from.Add(step)) {
			kept++
			continue
		}
		xs = putSample(xs, x)
		added = append(added, x)
	}
	m.demand[series] = xs
	return added, kept, nil
}

// PutBackoff records (or updates) a pool's back-off.
func (m *Memory) PutBackoff(b Backoff) error {
	if err := checkBackoff(b); err != nil {
		return err
	}
	b.Until, b.Refused = wall(b.Until), wall(b.Refused)
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := slices.BinarySearchFunc(m.backoffs, b.Pool, func(x Backoff, pool string) int { return strings.Compare(x.Pool, pool) })
	bs := make([]Backoff, 0, len(m.backoffs)+1)
	bs = append(bs, m.backoffs[:i]...)
	bs = append(bs, b)
	if found {
		i++
	}
	m.backoffs = append(bs, m.backoffs[i:]...)
	return nil
}

// DeleteBackoff clears a pool's back-off (a launch succeeded).
func (m *Memory) DeleteBackoff(pool string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, found := slices.BinarySearchFunc(m.backoffs, pool, func(x Backoff, pool string) int { return strings.Compare(x.Pool, pool) }); found {
		m.backoffs = slices.Concat(m.backoffs[:i], m.backoffs[i+1:])
	}
	return nil
}

// Backoffs returns the pools' back-offs, by pool. The slice is the
// memory's own, kept as it is by later writes, and returned without a
// copy (the simulator reads it every cycle): do not modify it.
func (m *Memory) Backoffs() ([]Backoff, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.backoffs, nil
}

// PutDrain records (or updates) a node's drain, in the drains in progress
// and in the drain log (where a drain of the node begun at the same time
// is replaced).
func (m *Memory) PutDrain(d Drain) error {
	if err := checkDrain(d); err != nil {
		return err
	}
	d.Started, d.Deadline = wall(d.Started), wall(d.Deadline)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drains == nil {
		m.drains = map[string]Drain{}
	}
	m.drains[d.Node] = d
	logOrder := func(x, y Drain) int {
		if c := x.Started.Compare(y.Started); c != 0 {
			return c
		}
		return strings.Compare(x.Node, y.Node)
	}
	if n := len(m.log); n == 0 || logOrder(m.log[n-1], d) < 0 {
		// The common case, a drain begun after the last: appended past
		// the end of every slice DrainLog returned.
		m.log = append(m.log, d)
		return nil
	}
	i, found := slices.BinarySearchFunc(m.log, d, logOrder)
	log := make([]Drain, 0, len(m.log)+1)
	log = append(log, m.log[:i]...)
	log = append(log, d)
	if found {
		i++
	}
	m.log = append(log, m.log[i:]...)
	return nil
}

// DeleteDrain forgets a node's drain (finished, cancelled, or the node is
// gone); the drain log keeps it.
func (m *Memory) DeleteDrain(node string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.drains, node)
	return nil
}

// Drains returns the drains in progress, by node.
func (m *Memory) Drains() ([]Drain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.drains), nil
}

// DrainLog returns the drains begun at or after since, finished or not,
// oldest first (ties by node). The slice is the memory's own, kept as it
// is by later writes, and returned without a copy (the simulator reads it
// every cycle): do not modify it.
func (m *Memory) DrainLog(since time.Time) ([]Drain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.log)
	i := sort.Search(n, func(i int) bool { return !m.log[i].Started.Before(since) })
	if i == n {
		return nil, nil
	}
	return m.log[i:n:n], nil
}

// PruneDrainLog deletes the drain log's entries begun before t and
// returns how many it deleted.
func (m *Memory) PruneDrainLog(before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.log), func(i int) bool { return !m.log[i].Started.Before(before) })
	if i == len(m.log) {
		m.log = nil
	} else {
		// Resliced, not moved: slices returned before keep their entries.
		m.log = m.log[i:]
	}
	return i, nil
}

// PutHalted records that scale-in was found halted at t.
func (m *Memory) PutHalted(t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.halted = wall(t.UTC())
	return nil
}

// Halted is when scale-in was last found halted, in UTC; zero if never.
func (m *Memory) Halted() (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.halted, nil
}

// PutIntent journals an intent. A second intent with the same key is
// refused, as the Store refuses it.
func (m *Memory) PutIntent(in Intent) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	in.Created = wall(in.Created)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.intents[in.Key]; ok {
		return fmt.Errorf("state: intent %s is already journaled", in.Key)
	}
	if m.intents == nil {
		m.intents = map[string]Intent{}
	}
	m.intents[in.Key] = in
	return nil
}

// DoneIntent removes an intent. Removing one that is not there is not an
// error.
func (m *Memory) DoneIntent(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.intents, key)
	return nil
}

// Intents returns the journaled intents, oldest first (ties by key).
func (m *Memory) Intents() ([]Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.intents) == 0 {
		return nil, nil
	}
	out := slices.Collect(maps.Values(m.intents))
	slices.SortFunc(out, func(a, b Intent) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// launchCopy is l as the memory keeps it and returns it: its own claims
// (none as nil, as the Store reads an empty list back), its times less
// their monotonic reading.
func launchCopy(l Launch) Launch {
	l.At = wall(l.At)
	if len(l.Claimed) == 0 {
		l.Claimed = nil
	} else {
		l.Claimed = slices.Clone(l.Claimed)
	}
	return l
}

// SettleLaunch records a launch the cloud took and clears its intent, at
// once.
func (m *Memory) SettleLaunch(l Launch) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.launches == nil {
		m.launches = map[string]Launch{}
	}
	m.launches[l.Key] = launchCopy(l)
	delete(m.intents, l.Key)
	return nil
}

// PutLaunches updates launch records (their claims), all or none.
func (m *Memory) PutLaunches(ls ...Launch) error {
	for _, l := range ls {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.launches == nil {
		m.launches = map[string]Launch{}
	}
	for _, l := range ls {
		m.launches[l.Key] = launchCopy(l)
	}
	return nil
}

// DeleteLaunches forgets launch records.
func (m *Memory) DeleteLaunches(keys ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.launches, k)
	}
	return nil
}

// Launches returns the launch records, oldest first (ties by key), each
// with claims of the caller's.
func (m *Memory) Launches() ([]Launch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.launches) == 0 {
		return nil, nil
	}
	out := make([]Launch, 0, len(m.launches))
	for _, l := range m.launches {
		out = append(out, launchCopy(l))
	}
	slices.SortFunc(out, func(a, b Launch) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// putNodeTime records a time for nodes, all or none, with the Store's
// check; what names the records in errors.
func putNodeTime(mu *sync.Mutex, records *map[string]NodeTime, what string, t time.Time, nodes ...string) error {
	for _, node := range nodes {
		if node == "" || t.IsZero() {
			return fmt.Errorf("state: %s of %q at %v: want a node and a time", what, node, t)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if *records == nil {
		*records = map[string]NodeTime{}
	}
	for _, node := range nodes {
		(*records)[node] = NodeTime{Node: node, At: wall(t)}
	}
	return nil
}

// deleteNames forgets names from records.
func deleteNames[T any](mu *sync.Mutex, records *map[string]T, names ...string) error {
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names {
		delete(*records, name)
	}
	return nil
}

// byName is records' values in their names' order (the Store's key
// order); nil when there are none.
func byName[T any](records map[string]T) []T {
	if len(records) == 0 {
		return nil
	}
	out := make([]T, 0, len(records))
	for _, k := range slices.Sorted(maps.Keys(records)) {
		out = append(out, records[k])
	}
	return out
}

// PutSeen records that the controller first saw the nodes in their clouds
// at t, all or none.
func (m *Memory) PutSeen(t time.Time, nodes ...string) error {
	return putNodeTime(&m.mu, &m.seen, "seen node", t, nodes...)
}

// DeleteSeen forgets nodes that are gone.
func (m *Memory) DeleteSeen(nodes ...string) error { return deleteNames(&m.mu, &m.seen, nodes...) }

// SeenNodes returns when each node was first seen, by node.
func (m *Memory) SeenNodes() ([]NodeTime, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.seen), nil
}

// PutReady records that the nodes' agents first reported healthy GPUs at
// t, all or none.
func (m *Memory) PutReady(t time.Time, nodes ...string) error {
	return putNodeTime(&m.mu, &m.ready, "ready node", t, nodes...)
}

// DeleteReady forgets nodes that are gone.
func (m *Memory) DeleteReady(nodes ...string) error { return deleteNames(&m.mu, &m.ready, nodes...) }

// ReadyNodes returns the nodes that have been ready, by node.
func (m *Memory) ReadyNodes() ([]NodeTime, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.ready), nil
}

// PutCancelled records that a node's drain was cancelled at t.
func (m *Memory) PutCancelled(node string, t time.Time) error {
	return putNodeTime(&m.mu, &m.cancelled, "cancelled drain", t, node)
}

// DeleteCancelled forgets a node's cancelled drain (the node is gone).
func (m *Memory) DeleteCancelled(node string) error {
	return deleteNames(&m.mu, &m.cancelled, node)
}

// CancelledDrains returns the nodes whose last drain was cancelled, by
// node.
func (m *Memory) CancelledDrains() ([]Cancelled, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.cancelled), nil
}

// PutPools records the pools as the config describes them, all or none,
// replacing their earlier records; the records of pools not named stay.
// A price that is not a finite number is refused, as the Store's JSON
// refuses it.
func (m *Memory) PutPools(pools ...PoolRecord) error {
	for _, p := range pools {
		if err := checkPool(p); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools == nil {
		m.pools = map[string]PoolRecord{}
	}
	for _, p := range pools {
		m.pools[p.Name] = p
	}
	return nil
}

// Pools returns the pools' last records, by name.
func (m *Memory) Pools() ([]PoolRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.pools), nil
}

// ClaimFleet records the fleet the records belong to the first time, and
// refuses another name after, with the Store's error naming "memory".
func (m *Memory) ClaimFleet(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.claimed:
		m.fleet, m.claimed = name, true
	case m.fleet != name:
		return fleetClaimed(memoryPath, m.fleet, name)
	}
	return nil
}

// PutCredential records a node's credential, replacing any before it.
func (m *Memory) PutCredential(c Credential) error {
	if c.Node == "" || c.Hash == "" {
		return fmt.Errorf("state: credential with no node or hash: %+v", c)
	}
	c.PreviousUntil, c.Issued, c.Registered = wall(c.PreviousUntil), wall(c.Issued), wall(c.Registered)
	c.Revoked, c.InstanceCreated = wall(c.Revoked), wall(c.InstanceCreated)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creds == nil {
		m.creds = map[string]Credential{}
	}
	m.creds[c.Node] = c
	return nil
}

// DeleteCredentials forgets nodes' credentials.
func (m *Memory) DeleteCredentials(nodes ...string) error {
	return deleteNames(&m.mu, &m.creds, nodes...)
}

// Credentials returns every node's credential record, by node.
func (m *Memory) Credentials() ([]Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.creds), nil
}

// PutAPIToken records an API token, replacing any of its name.
func (m *Memory) PutAPIToken(t APIToken) error {
	if err := checkAPIToken(t); err != nil {
		return err
	}
	t.PreviousUntil, t.Created, t.Rotated = wall(t.PreviousUntil), wall(t.Created), wall(t.Rotated)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens == nil {
		m.tokens = map[string]APIToken{}
	}
	m.tokens[t.Name] = t
	return nil
}

// DeleteAPIToken forgets an API token.
func (m *Memory) DeleteAPIToken(name string) error { return deleteNames(&m.mu, &m.tokens, name) }

// APITokens returns every API token's record, by name.
func (m *Memory) APITokens() ([]APIToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return byName(m.tokens), nil
}
