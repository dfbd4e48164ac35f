package config

import (
	"fmt"
	"math"
	"net"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// drainSignals are the signals drain.signal may name. SIGKILL and SIGSTOP
// cannot be caught, so they cannot ask a job to checkpoint.
var drainSignals = []string{"SIGALRM", "SIGCONT", "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGWINCH"}

// duration parses a duration attribute's text, at r, into dst when it is
// set: longer than 0, or, with zeroOK, not negative.
func (d *decoder) duration(name, text string, r hcl.Range, zeroOK bool, dst *time.Duration) state {
	if st := d.state(r); st != set {
		return st
	}
	dur, err := fleet.ParseDuration(text)
	switch {
	case err != nil:
		d.errorf(r, "Invalid duration", "%s must be %s; got %q.", name, fleet.DurationForm, text)
		d.refuse(r)
		return bad
	case zeroOK && dur < 0:
		d.invalid(r, "%s must not be negative (0 for at once), got %q.", name, text)
		return bad
	case !zeroOK && dur <= 0:
		d.invalid(r, "%s must be longer than 0, got %q.", name, text)
		return bad
	}
	*dst = dur
	return set
}

// nonEmpty refuses an empty string given at r.
func (d *decoder) nonEmpty(name, value string, r hcl.Range) state {
	st := d.state(r)
	if st == set && value == "" {
		d.invalid(r, "%s must not be empty.", name)
		return bad
	}
	return st
}

// atLeast refuses an integer given at r below lo.
func (d *decoder) atLeast(name string, value, lo int, r hcl.Range) state {
	st := d.state(r)
	if st == set && value < lo {
		d.invalid(r, "%s must be %d or more, got %d.", name, lo, value)
		return bad
	}
	return st
}

// between refuses the value at r, when it is set, if it is below lo or
// above hi.
func (d *decoder) between(name string, value, lo, hi int, r hcl.Range) state {
	st := d.state(r)
	if st == set && (value < lo || value > hi) {
		d.invalid(r, "%s must be %d to %d, got %d.", name, lo, hi, value)
		return bad
	}
	return st
}

// check refuses the value at r, when it is set, if ok is false.
func (d *decoder) check(r hcl.Range, ok bool, format string, args ...any) state {
	st := d.state(r)
	if st == set && !ok {
		d.invalid(r, format, args...)
		return bad
	}
	return st
}

// checkMinimums checks that limits.max_gpus leaves room for every pool's
// minimum.
func checkMinimums(d *decoder, cfg *Config, limits *limitsBody) {
	if d.state(limits.MaxGPUsAt) != set || cfg.Limits.MaxGPUs <= 0 {
		return
	}
	sum := 0
	for i := range cfg.Pools {
		sum = fleet.SatAdd(sum, fleet.SatMul(cfg.Pools[i].Min, cfg.Pools[i].GPUsPerNode))
	}
	if sum > cfg.Limits.MaxGPUs {
		d.invalid(limits.MaxGPUsAt, "The pools' min nodes hold %d GPUs together, more than max_gpus (%d).", sum, cfg.Limits.MaxGPUs)
	}
}

// checkHorizon checks that the forecast reaches past the longest lead time
// plus the hysteresis. The error goes on what the file sets: the horizon,
// else the hysteresis, else the pool's lead time.
func checkHorizon(d *decoder, cfg *Config, forecast *forecastBody, pools []poolResult) {
	longest := -1
	for i := range cfg.Pools {
		if longest < 0 || cfg.Pools[i].LeadTime > cfg.Pools[longest].LeadTime {
			longest = i
		}
	}
	if longest < 0 {
		return
	}
	p := &cfg.Pools[longest]
	f := &cfg.Forecast
	need := time.Duration(math.MaxInt64)
	if p.LeadTime <= need-f.Hysteresis {
		need = p.LeadTime + f.Hysteresis
	}
	if f.Horizon >= need {
		return
	}
	detail := fmt.Sprintf("The forecast horizon (%s) must reach past pool %q's lead_time (%s) plus the hysteresis (%s), i.e. be at least %s.",
		f.Horizon, p.Name, p.LeadTime, f.Hysteresis, need)
	var fb forecastBody
	if forecast != nil {
		fb = *forecast
	}
	pb := pools[longest].body
	switch {
	case fb.HorizonAt.Filename != "":
		d.invalid(fb.HorizonAt, "%s", detail)
	case fb.HysteresisAt.Filename != "":
		d.invalid(fb.HysteresisAt, "%s", detail)
	case pb.LeadTimeAt.Filename != "":
		d.invalid(pb.LeadTimeAt, "%s", detail)
	default: // not reached with the shipped defaults
		d.errorf(pb.DefRange, "Invalid value", "%s", detail)
	}
}

// Validate checks the forecast block and fills out: durations longer than
// 0, a quantile in (0, 1), a wait value above 0, and step <= horizon <=
// history. Every error points at the value it refuses.
func (f *forecastBody) Validate(d *decoder, out *fleet.ForecastSettings) {
	stepSt := d.duration("step", f.Step, f.StepAt, false, &out.Step)
	horizonSt := d.duration("horizon", f.Horizon, f.HorizonAt, false, &out.Horizon)
	historySt := d.duration("history", f.History, f.HistoryAt, false, &out.History)
	d.duration("hysteresis", f.Hysteresis, f.HysteresisAt, false, &out.Hysteresis)
	if d.check(f.QuantileAt, f.Quantile > 0 && f.Quantile < 1, "quantile must be between 0 and 1 (exclusive), got %g.", f.Quantile) == set {
		out.Quantile = f.Quantile
	}
	if d.check(f.WaitValueAt, f.WaitValue > 0, "wait_value_per_gpu_hour must be above 0 (what a GPU-hour of waiting costs, in dollars), got %g.", f.WaitValue) == set {
		out.WaitValuePerGPUHour = f.WaitValue
	}
	if stepSt != bad && horizonSt != bad && out.Horizon < out.Step {
		at := f.HorizonAt
		if horizonSt == unset {
			at = f.StepAt
		}
		d.invalid(at, "horizon (%s) must not be shorter than step (%s).", out.Horizon, out.Step)
		horizonSt = bad
	}
	if horizonSt != bad && historySt != bad && out.History < out.Horizon {
		at := f.HistoryAt
		if historySt == unset {
			at = f.HorizonAt
		}
		d.invalid(at, "history (%s) must not be shorter than horizon (%s).", out.History, out.Horizon)
	}
}

// Validate checks the drain block and fills out: durations longer than 0
// and a signal a job can catch. Every error points at the value it refuses.
func (dr *drainBody) Validate(d *decoder, out *fleet.DrainSettings) {
	d.duration("checkpoint_max_age", dr.CheckpointMaxAge, dr.CheckpointMaxAgeAt, false, &out.CheckpointMaxAge)
	d.duration("timeout", dr.Timeout, dr.TimeoutAt, false, &out.Timeout)
	d.duration("long_running_after", dr.LongRunningAfter, dr.LongRunningAfterAt, false, &out.LongRunningAfter)
	if d.check(dr.SignalAt, slices.Contains(drainSignals, dr.Signal), "Unknown signal %q; signal must be one of %s.", dr.Signal, strings.Join(drainSignals, ", ")) == set {
		out.Signal = dr.Signal
	}
}

// Validate checks the limits block and fills out: counts, shares in (0, 1]
// and a spend that is not negative. Every error points at the value it refuses.
func (l *limitsBody) Validate(d *decoder, out *fleet.Limits) {
	if d.atLeast("max_gpus", l.MaxGPUs, 0, l.MaxGPUsAt) == set {
		out.MaxGPUs = l.MaxGPUs
	}
	if d.check(l.MaxSpendPerHourAt, l.MaxSpendPerHour >= 0, "max_spend_per_hour must not be negative, got %g.", l.MaxSpendPerHour) == set {
		out.MaxSpendPerHour = l.MaxSpendPerHour
	}
	if d.atLeast("max_scale_in_per_cycle", l.MaxScaleInPerCycle, 1, l.MaxScaleInPerCycleAt) == set {
		out.MaxScaleInPerCycle = l.MaxScaleInPerCycle
	}
	if d.check(l.ScaleInShareAt, l.ScaleInShare > 0 && l.ScaleInShare <= 1, "scale_in_share must be more than 0 and at most 1, got %g.", l.ScaleInShare) == set {
		out.ScaleInShare = l.ScaleInShare
	}
	d.duration("scale_in_window", l.ScaleInWindow, l.ScaleInWindowAt, false, &out.ScaleInWindow)
	d.duration("scale_in_delay_after_launch", l.ScaleInDelayAfterLaunch, l.ScaleInDelayAfterLaunchAt, true, &out.ScaleInDelayAfterLaunch)
	d.duration("scale_in_unneeded_time", l.ScaleInUnneededTime, l.ScaleInUnneededTimeAt, true, &out.ScaleInUnneededTime)
	if d.check(l.SilentShareHaltAt, l.SilentShareHalt > 0 && l.SilentShareHalt <= 1, "silent_share_halt must be more than 0 and at most 1, got %g.", l.SilentShareHalt) == set {
		out.SilentShareHalt = l.SilentShareHalt
	}
}

// Validate checks the controller block and fills out and agentTimeout
// (the planner's, fleet.Settings.AgentTimeout): durations, a listen
// address (plain HTTP only on loopback or with insecure), a fleet name a
// tag can hold, and TLS files in pairs. Every error points at the value it refuses.
func (c *controllerBody) Validate(d *decoder, out *fleet.ControllerSettings, agentTimeout *time.Duration) {
	d.duration("interval", c.Interval, c.IntervalAt, false, &out.Interval)
	d.duration("agent_timeout", c.AgentTimeout, c.AgentTimeoutAt, false, agentTimeout)
	listen := d.state(c.ListenAt)
	if listen == set {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			d.invalid(c.ListenAt, "listen must be an address such as \"127.0.0.1:8790\" or \":8790\": %v.", err)
			listen = bad
		} else {
			out.Listen = c.Listen
		}
	}
	if d.nonEmpty("state_dir", c.StateDir, c.StateDirAt) == set {
		out.StateDir = c.StateDir
	}
	if d.check(c.FleetAt, fleetName.MatchString(c.Fleet), "fleet must be 1-63 lowercase letters, digits and dashes, starting and ending with a letter or digit (it is a tag value), got %q.", c.Fleet) == set {
		out.Fleet = c.Fleet
	}
	cert, key := d.nonEmpty("tls_cert_file", c.TLSCertFile, c.TLSCertFileAt), d.nonEmpty("tls_key_file", c.TLSKeyFile, c.TLSKeyFileAt)
	out.TLSCertFile, out.TLSKeyFile = c.TLSCertFile, c.TLSKeyFile
	switch {
	case cert == set && key == unset:
		d.invalid(c.TLSCertFileAt, "tls_cert_file needs tls_key_file, the certificate's private key.")
	case key == set && cert == unset:
		d.invalid(c.TLSKeyFileAt, "tls_key_file needs tls_cert_file, the certificate it is the key of.")
	}
	out.Insecure = c.Insecure
	if d.nonEmpty("bootstrap_token_file", c.BootstrapTokenFile, c.BootstrapTokenFileAt) == set {
		out.BootstrapTokenFile = c.BootstrapTokenFile
	}
	if d.nonEmpty("aws_identity_certificates", c.AWSIdentityCertificates, c.AWSIdentityCertificatesAt) == set {
		out.AWSIdentityCertificates = c.AWSIdentityCertificates
	}
	if d.nonEmpty("gcp_identity_audience", c.GCPIdentityAudience, c.GCPIdentityAudienceAt) == set {
		u, err := neturl.Parse(c.GCPIdentityAudience)
		if d.check(c.GCPIdentityAudienceAt, err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "",
			"gcp_identity_audience must be the controller's URL as the agents reach it (https://HOST:PORT), got %q.", c.GCPIdentityAudience) == set {
			out.GCPIdentityAudience = c.GCPIdentityAudience
		}
	}
	if listen == set && cert != set && key != set {
		if err := out.CheckListen(out.Listen); err != nil {
			d.invalid(c.ListenAt, "%s.", err)
		}
	}
	if c.HA != nil {
		out.HA = c.HA.Validate(d, out.TLS())
	}
}

// Validate checks the demand block and fills out: an http(s) Prometheus URL
// and a query, each needing the other, and backfill only with them. Every
// error points at the value it refuses.
func (dm *demandBody) Validate(d *decoder, out *fleet.DemandSettings) {
	url := d.state(dm.PrometheusURLAt)
	if url == set {
		if u, err := neturl.Parse(dm.PrometheusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.invalid(dm.PrometheusURLAt, "prometheus_url must be an http or https URL such as \"http://prometheus:9090\", got %q.", dm.PrometheusURL)
		}
	}
	query := d.check(dm.PrometheusQueryAt, strings.TrimSpace(dm.PrometheusQuery) != "", "prometheus_query must not be empty.")
	switch {
	case url == set && dm.PrometheusQueryAt.Filename == "":
		d.invalid(dm.PrometheusURLAt, "prometheus_url needs prometheus_query: the PromQL expression for the GPUs in use, e.g. \"count(DCGM_FI_DEV_GPU_UTIL > 0)\".")
	case query == set && dm.PrometheusURLAt.Filename == "":
		d.invalid(dm.PrometheusQueryAt, "prometheus_query needs prometheus_url, the Prometheus server to ask.")
	}
	out.PrometheusURL, out.PrometheusQuery = dm.PrometheusURL, dm.PrometheusQuery
	d.duration("prometheus_timeout", dm.PrometheusTimeout, dm.PrometheusTimeoutAt, false, &out.PrometheusTimeout)
	if d.state(dm.BackfillAt) == set {
		if dm.Backfill && dm.PrometheusURLAt.Filename == "" {
			// Turning it off needs nothing.
			d.invalid(dm.BackfillAt, "backfill needs prometheus_url: it fills the demand history from the query's past answers.")
		}
		out.Backfill = dm.Backfill
	}
}

// Validate checks the simulate block and fills out: rates and shares in
// range, a checkpoint duration of 0 to 24h, and the reservation and
// placeholder modes. Every error points at the value it refuses.
func (s *simulateBody) Validate(d *decoder, out *fleet.SimulateSettings) {
	d.duration("checkpoint_interval", s.CheckpointInterval, s.CheckpointIntervalAt, false, &out.CheckpointInterval)
	d.duration("spot_notice", s.SpotNotice, s.SpotNoticeAt, false, &out.SpotNotice)
	if d.check(s.SpotInterruptionsPerHourAt, s.SpotInterruptionsPerHour >= 0, "spot_interruptions_per_hour must not be negative, got %g.", s.SpotInterruptionsPerHour) == set {
		out.SpotInterruptionsPerHour = s.SpotInterruptionsPerHour
	}
	var dur time.Duration
	if d.duration("checkpoint_duration", s.CheckpointDuration, s.CheckpointDurationAt, true, &dur) == set {
		if d.check(s.CheckpointDurationAt, dur <= maxCheckpointDuration, "checkpoint_duration must be at most %s (a checkpoint that takes longer is a stuck job), got %s.",
			fleet.FormatDuration(maxCheckpointDuration), fleet.FormatDuration(dur)) == set {
			out.CheckpointDuration = dur
		}
	}
	if d.check(s.UnresponsiveJobsAt, s.UnresponsiveJobs >= 0 && s.UnresponsiveJobs <= 1, "unresponsive_jobs must be a share of jobs from 0 to 1, got %g.", s.UnresponsiveJobs) == set {
		out.UnresponsiveJobs = s.UnresponsiveJobs
	}
	if d.check(s.ReservationsAt, slices.Contains(fleet.ReservationModes, s.Reservations),
		"reservations must be %q (every policy holds the configured reservations) or %q (the predictive policy follows the baseline advice), got %q.",
		fleet.ReservationsConfigured, fleet.ReservationsAdvised, s.Reservations) == set {
		out.Reservations = s.Reservations
	}
	d.duration("advice_after", s.AdviceAfter, s.AdviceAfterAt, false, &out.AdviceAfter)
	if d.atLeast("headroom_gpus", s.HeadroomGPUs, 0, s.HeadroomGPUsAt) == set {
		out.HeadroomGPUs = s.HeadroomGPUs
	}
	if d.check(s.HeadroomPlaceholdersAt, slices.Contains(fleet.PlaceholderSizes, s.HeadroomPlaceholders),
		"headroom_placeholders must be %q (each as wide as a node: the buffer is whole empty nodes) or %q (one GPU each: the buffer also fills busy nodes' fragments), got %q.",
		fleet.PlaceholdersNode, fleet.PlaceholdersGPU, s.HeadroomPlaceholders) == set {
		out.HeadroomPlaceholders = s.HeadroomPlaceholders
	}
}

// maxCheckpointDuration bounds simulate.checkpoint_duration.
const maxCheckpointDuration = 24 * time.Hour

// Validate checks the synthetic block and fills out: GPU counts not
// negative, peak >= base, an hour of the day, and noise not negative. Every error points at the value it refuses.
func (s *syntheticBody) Validate(d *decoder, out *fleet.SyntheticSettings) {
	if d.state(s.SeedAt) == set {
		out.Seed = s.Seed
	}
	baseSt := d.atLeast("base_gpus", s.BaseGPUs, 0, s.BaseGPUsAt)
	peakSt := d.atLeast("peak_gpus", s.PeakGPUs, 0, s.PeakGPUsAt)
	if baseSt == set {
		out.BaseGPUs = s.BaseGPUs
	}
	if peakSt == set {
		out.PeakGPUs = s.PeakGPUs
	}
	if baseSt == set && peakSt == set && s.PeakGPUs < s.BaseGPUs {
		d.invalid(s.PeakGPUsAt, "peak_gpus (%d) must not be less than base_gpus (%d).", s.PeakGPUs, s.BaseGPUs)
	}
	if d.check(s.PeakHourAt, s.PeakHour >= 0 && s.PeakHour <= 23, "peak_hour must be an hour of the day from 0 to 23, got %d.", s.PeakHour) == set {
		out.PeakHour = s.PeakHour
	}
	if d.check(s.NoiseAt, s.Noise >= 0, "noise must not be negative, got %g.", s.Noise) == set {
		out.Noise = s.Noise
	}
}

// fleetName is what controller.fleet may be.
var fleetName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// The bounds of the usage block: a retention of at least an hour (the
// hours are written whole) and at most ten years, and at most 10,000
// teams and 1,000 tiers told apart (each is a metric's label value).
const (
	MaxUsageRetention = 10 * 365 * 24 * time.Hour
	MaxUsageTeams     = 10_000
	MaxUsageTiers     = 1_000
)

// Validate checks the usage block and fills out: retentions of an hour
// to MaxUsageRetention, caps on the teams and tiers told apart, and
// allocated-idle's threshold (0-100 percent) and window (a minute to a
// day). Every error points at the value it refuses.
func (u *usageBody) Validate(d *decoder, out *fleet.UsageSettings) {
	d.durationWithin("job_retention", u.JobRetention, u.JobRetentionAt, time.Hour, MaxUsageRetention, &out.JobRetention)
	d.durationWithin("hour_retention", u.HourRetention, u.HourRetentionAt, time.Hour, MaxUsageRetention, &out.HourRetention)
	if d.between("max_teams", u.MaxTeams, 1, MaxUsageTeams, u.MaxTeamsAt) == set {
		out.MaxTeams = u.MaxTeams
	}
	if d.between("max_tiers", u.MaxTiers, 1, MaxUsageTiers, u.MaxTiersAt) == set {
		out.MaxTiers = u.MaxTiers
	}
	out.ShareIdle = u.ShareIdle
	if d.between("idle_threshold", u.IdleThreshold, 0, 100, u.IdleThresholdAt) == set {
		out.IdleThreshold = u.IdleThreshold
	}
	d.durationWithin("idle_window", u.IdleWindow, u.IdleWindowAt, time.Minute, 24*time.Hour, &out.IdleWindow)
}
