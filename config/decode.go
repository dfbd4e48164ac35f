package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"net"
	neturl "net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/fleetcast/autoscaler/fleet"
)

// ProviderBlock is what Parse needs of one provider: its name, which is
// also the type of its pools' provider block, and that block's decoder.
// Each provider registers its own in providers/registry.
type ProviderBlock struct {
	// Name is the provider's name: a pool's provider attribute, and its
	// block's type unless BlockType says another.
	Name string
	// BlockType is the type of its pools' block when it is not Name (a
	// plugin pool's `target` block).
	BlockType string
	// Attribute is a pool attribute its pools may set beside the block
	// (a plugin pool's `plugin`, naming its plugin); empty for none.
	Attribute string
	// Optional lets a pool of the provider leave its block out; Decode
	// then gets a nil block and gives the defaults.
	Optional bool
	// Decode decodes a pool's block (and Attribute, nil when the pool
	// does not set it) into the provider's typed settings, with decode,
	// and checks them, against the pool's other fields too: a field the
	// config got wrong is zero in pool, and is reported already. The
	// diagnostics it returns are its checks', each pointing at the value
	// it refuses; those on a value decode refused are dropped.
	Decode func(in ProviderInput, pool fleet.Pool, decode Decoder) (fleet.ProviderSettings, hcl.Diagnostics)
}

// ProviderInput is what a pool gives its provider's decoder: its block
// and its provider attribute, each nil when the pool has none.
type ProviderInput struct {
	Block     *hcl.Block
	Attribute *hcl.Attribute
}

// blockType is the type of the provider's pools' block.
func (p ProviderBlock) blockType() string {
	if p.BlockType != "" {
		return p.BlockType
	}
	return p.Name
}

// InvalidValue is the "Invalid value" error on the value at r, as every
// semantic check reports one.
func InvalidValue(r hcl.Range, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value", Detail: fmt.Sprintf(format, args...), Subject: r.Ptr()}
}

// Decoder decodes a block's body into val, a pointer to a struct with
// gohcl tags, as Parse decodes its own blocks: with gohcl, after refusing
// the values no attribute may hold (not constant, null, a number out of
// range), and with gohcl's type errors made to name the attribute and
// point at its whole value. Its diagnostics go to Parse's; it reports
// whether there were none.
type Decoder func(body hcl.Body, val any) bool

// drainSignals are the signals drain.signal may name. SIGKILL and SIGSTOP
// cannot be caught, so they cannot ask a job to checkpoint.
var drainSignals = []string{"SIGALRM", "SIGCONT", "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGWINCH"}

// The config file, as gohcl decodes it. Each block's struct holds its
// attributes' values and, in the fields tagged attr_value_range, where
// they are, so that every check names the value it refuses. An absent
// attribute keeps its zero value and the zero Range; its default is
// applied from Defaults.

// rootSchema is a config file's: its pools, and the blocks it may have
// once each (decoded one by one, so that a duplicate does not hide the
// first's errors).
var rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "pool", LabelNames: []string{"name"}},
	{Type: "plugin", LabelNames: []string{"name"}},
	{Type: "forecast"}, {Type: "drain"}, {Type: "limits"}, {Type: "controller"},
	{Type: "demand"}, {Type: "synthetic"}, {Type: "simulate"},
}}

type poolBody struct {
	// Name and where it and the block are, from the block's header.
	Name      string
	NameRange hcl.Range
	DefRange  hcl.Range

	Provider         string   `hcl:"provider"`
	Region           string   `hcl:"region,optional"`
	Zones            []string `hcl:"zones,optional"`
	InstanceType     string   `hcl:"instance_type"`
	GPUModel         string   `hcl:"gpu_model,optional"`
	GPUsPerNode      int      `hcl:"gpus_per_node"`
	Capacity         string   `hcl:"capacity,optional"`
	PricePerHour     float64  `hcl:"price_per_hour"`
	LeadTime         string   `hcl:"lead_time,optional"`
	ProvisionTimeout string   `hcl:"provision_timeout,optional"`
	Min              int      `hcl:"min,optional"`
	Max              int      `hcl:"max"`
	Priority         int      `hcl:"priority,optional"`
	// Rest holds the provider block.
	Rest hcl.Body `hcl:",remain"`

	ProviderAt         hcl.Range `hcl:"provider,attr_value_range"`
	InstanceTypeAt     hcl.Range `hcl:"instance_type,attr_value_range"`
	GPUsPerNodeAt      hcl.Range `hcl:"gpus_per_node,attr_value_range"`
	CapacityAt         hcl.Range `hcl:"capacity,attr_value_range"`
	PricePerHourAt     hcl.Range `hcl:"price_per_hour,attr_value_range"`
	LeadTimeAt         hcl.Range `hcl:"lead_time,attr_value_range"`
	ProvisionTimeoutAt hcl.Range `hcl:"provision_timeout,attr_value_range"`
	MinAt              hcl.Range `hcl:"min,attr_value_range"`
	MaxAt              hcl.Range `hcl:"max,attr_value_range"`
}

type forecastBody struct {
	Step       string  `hcl:"step,optional"`
	Horizon    string  `hcl:"horizon,optional"`
	Quantile   float64 `hcl:"quantile,optional"`
	History    string  `hcl:"history,optional"`
	Hysteresis string  `hcl:"hysteresis,optional"`
	WaitValue  float64 `hcl:"wait_value_per_gpu_hour,optional"`

	WaitValueAt  hcl.Range `hcl:"wait_value_per_gpu_hour,attr_value_range"`
	StepAt       hcl.Range `hcl:"step,attr_value_range"`
	HorizonAt    hcl.Range `hcl:"horizon,attr_value_range"`
	QuantileAt   hcl.Range `hcl:"quantile,attr_value_range"`
	HistoryAt    hcl.Range `hcl:"history,attr_value_range"`
	HysteresisAt hcl.Range `hcl:"hysteresis,attr_value_range"`
}

type drainBody struct {
	CheckpointMaxAge string `hcl:"checkpoint_max_age,optional"`
	Timeout          string `hcl:"timeout,optional"`
	Signal           string `hcl:"signal,optional"`
	LongRunningAfter string `hcl:"long_running_after,optional"`

	CheckpointMaxAgeAt hcl.Range `hcl:"checkpoint_max_age,attr_value_range"`
	TimeoutAt          hcl.Range `hcl:"timeout,attr_value_range"`
	SignalAt           hcl.Range `hcl:"signal,attr_value_range"`
	LongRunningAfterAt hcl.Range `hcl:"long_running_after,attr_value_range"`
}

type limitsBody struct {
	MaxGPUs                 int     `hcl:"max_gpus,optional"`
	MaxSpendPerHour         float64 `hcl:"max_spend_per_hour,optional"`
	MaxScaleInPerCycle      int     `hcl:"max_scale_in_per_cycle,optional"`
	ScaleInShare            float64 `hcl:"scale_in_share,optional"`
	ScaleInWindow           string  `hcl:"scale_in_window,optional"`
	SilentShareHalt         float64 `hcl:"silent_share_halt,optional"`
	ScaleInDelayAfterLaunch string  `hcl:"scale_in_delay_after_launch,optional"`
	ScaleInUnneededTime     string  `hcl:"scale_in_unneeded_time,optional"`

	MaxGPUsAt                 hcl.Range `hcl:"max_gpus,attr_value_range"`
	MaxSpendPerHourAt         hcl.Range `hcl:"max_spend_per_hour,attr_value_range"`
	MaxScaleInPerCycleAt      hcl.Range `hcl:"max_scale_in_per_cycle,attr_value_range"`
	ScaleInShareAt            hcl.Range `hcl:"scale_in_share,attr_value_range"`
	ScaleInWindowAt           hcl.Range `hcl:"scale_in_window,attr_value_range"`
	SilentShareHaltAt         hcl.Range `hcl:"silent_share_halt,attr_value_range"`
	ScaleInDelayAfterLaunchAt hcl.Range `hcl:"scale_in_delay_after_launch,attr_value_range"`
	ScaleInUnneededTimeAt     hcl.Range `hcl:"scale_in_unneeded_time,attr_value_range"`
}

type controllerBody struct {
	Interval                string `hcl:"interval,optional"`
	Listen                  string `hcl:"listen,optional"`
	StateDir                string `hcl:"state_dir,optional"`
	AgentTimeout            string `hcl:"agent_timeout,optional"`
	Fleet                   string `hcl:"fleet,optional"`
	TLSCertFile             string `hcl:"tls_cert_file,optional"`
	TLSKeyFile              string `hcl:"tls_key_file,optional"`
	Insecure                bool   `hcl:"insecure,optional"`
	BootstrapTokenFile      string `hcl:"bootstrap_token_file,optional"`
	AWSIdentityCertificates string `hcl:"aws_identity_certificates,optional"`
	GCPIdentityAudience     string `hcl:"gcp_identity_audience,optional"`

	IntervalAt                hcl.Range `hcl:"interval,attr_value_range"`
	ListenAt                  hcl.Range `hcl:"listen,attr_value_range"`
	StateDirAt                hcl.Range `hcl:"state_dir,attr_value_range"`
	AgentTimeoutAt            hcl.Range `hcl:"agent_timeout,attr_value_range"`
	FleetAt                   hcl.Range `hcl:"fleet,attr_value_range"`
	TLSCertFileAt             hcl.Range `hcl:"tls_cert_file,attr_value_range"`
	TLSKeyFileAt              hcl.Range `hcl:"tls_key_file,attr_value_range"`
	InsecureAt                hcl.Range `hcl:"insecure,attr_value_range"`
	BootstrapTokenFileAt      hcl.Range `hcl:"bootstrap_token_file,attr_value_range"`
	AWSIdentityCertificatesAt hcl.Range `hcl:"aws_identity_certificates,attr_value_range"`
	GCPIdentityAudienceAt     hcl.Range `hcl:"gcp_identity_audience,attr_value_range"`
}

type demandBody struct {
	PrometheusURL     string `hcl:"prometheus_url,optional"`
	PrometheusQuery   string `hcl:"prometheus_query,optional"`
	PrometheusTimeout string `hcl:"prometheus_timeout,optional"`
	Backfill          bool   `hcl:"backfill,optional"`

	PrometheusURLAt     hcl.Range `hcl:"prometheus_url,attr_value_range"`
	PrometheusQueryAt   hcl.Range `hcl:"prometheus_query,attr_value_range"`
	PrometheusTimeoutAt hcl.Range `hcl:"prometheus_timeout,attr_value_range"`
	BackfillAt          hcl.Range `hcl:"backfill,attr_value_range"`
}

type syntheticBody struct {
	Seed     int64   `hcl:"seed,optional"`
	BaseGPUs int     `hcl:"base_gpus,optional"`
	PeakGPUs int     `hcl:"peak_gpus,optional"`
	PeakHour int     `hcl:"peak_hour,optional"`
	Noise    float64 `hcl:"noise,optional"`

	SeedAt     hcl.Range `hcl:"seed,attr_value_range"`
	BaseGPUsAt hcl.Range `hcl:"base_gpus,attr_value_range"`
	PeakGPUsAt hcl.Range `hcl:"peak_gpus,attr_value_range"`
	PeakHourAt hcl.Range `hcl:"peak_hour,attr_value_range"`
	NoiseAt    hcl.Range `hcl:"noise,attr_value_range"`
}

type simulateBody struct {
	CheckpointInterval       string  `hcl:"checkpoint_interval,optional"`
	SpotInterruptionsPerHour float64 `hcl:"spot_interruptions_per_hour,optional"`
	SpotNotice               string  `hcl:"spot_notice,optional"`
	CheckpointDuration       string  `hcl:"checkpoint_duration,optional"`
	UnresponsiveJobs         float64 `hcl:"unresponsive_jobs,optional"`
	Reservations             string  `hcl:"reservations,optional"`
	AdviceAfter              string  `hcl:"advice_after,optional"`
	HeadroomGPUs             int     `hcl:"headroom_gpus,optional"`
	HeadroomPlaceholders     string  `hcl:"headroom_placeholders,optional"`

	CheckpointIntervalAt       hcl.Range `hcl:"checkpoint_interval,attr_value_range"`
	SpotInterruptionsPerHourAt hcl.Range `hcl:"spot_interruptions_per_hour,attr_value_range"`
	SpotNoticeAt               hcl.Range `hcl:"spot_notice,attr_value_range"`
	CheckpointDurationAt       hcl.Range `hcl:"checkpoint_duration,attr_value_range"`
	UnresponsiveJobsAt         hcl.Range `hcl:"unresponsive_jobs,attr_value_range"`
	ReservationsAt             hcl.Range `hcl:"reservations,attr_value_range"`
	AdviceAfterAt              hcl.Range `hcl:"advice_after,attr_value_range"`
	HeadroomGPUsAt             hcl.Range `hcl:"headroom_gpus,attr_value_range"`
	HeadroomPlaceholdersAt     hcl.Range `hcl:"headroom_placeholders,attr_value_range"`
}

// decoder decodes one file: it collects diagnostics, counts the errors,
// and knows which attribute values are bad, so that a check never
// repeats an error, nor compares with a value already refused.
type decoder struct {
	providers []ProviderBlock
	diags     hcl.Diagnostics
	errors    int
	// attrs are the file's attributes by their value's first byte.
	attrs map[int]*hclsyntax.Attribute
	// bad are the values refused, by their first byte, and their ranges.
	bad       map[int]bool
	badRanges []hcl.Range
}

func newDecoder(providers []ProviderBlock) *decoder {
	return &decoder{providers: providers, attrs: map[int]*hclsyntax.Attribute{}, bad: map[int]bool{}}
}

// add records diagnostics.
func (d *decoder) add(diags ...*hcl.Diagnostic) {
	for _, diag := range diags {
		if diag.Severity == hcl.DiagError {
			d.errors++
		}
	}
	d.diags = append(d.diags, diags...)
}

func (d *decoder) errorf(subject hcl.Range, summary, format string, args ...any) {
	d.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: subject.Ptr()})
}

// refuse marks the value at r bad.
func (d *decoder) refuse(r hcl.Range) {
	if !d.bad[r.Start.Byte] {
		d.bad[r.Start.Byte] = true
		d.badRanges = append(d.badRanges, r)
	}
}

// invalid records an "Invalid value" error on the value at r and marks it
// bad.
func (d *decoder) invalid(r hcl.Range, format string, args ...any) {
	d.add(InvalidValue(r, format, args...))
	d.refuse(r)
}

// The bounds of a pool's size and nodes: more is a mistake (a typo, a
// number meant for another field), and would make the fleet's GPU count
// overflow.
const (
	// MaxPoolNodes bounds a pool's min and max.
	MaxPoolNodes = 1_000_000
	// MaxGPUsPerNode bounds gpus_per_node (a rack-scale system counted as
	// one node has 72).
	MaxGPUsPerNode = 1024
)

// state is what became of an attribute.
type state uint8

const (
	unset state = iota // absent: the default applies
	set                // present and valid
	bad                // present and invalid; an error was recorded
)

// state says what became of the attribute whose value is at r.
func (d *decoder) state(r hcl.Range) state {
	switch {
	case r.Filename == "":
		return unset
	case d.bad[r.Start.Byte]:
		return bad
	}
	return set
}

// scan evaluates the attributes of body that schema names, once, before
// gohcl decodes them, and refuses what no attribute may hold: a value that
// cannot be evaluated (a variable, a function), an unknown or null value
// (a config leaves an attribute out for its default), and a number that
// is infinite, or too large or small to use (converting one to a string
// could take hours). Attributes the schema does not name are left to
// gohcl's "Unsupported argument", unevaluated.
func (d *decoder) scan(body hcl.Body, schema *hcl.BodySchema) {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return
	}
	for _, as := range schema.Attributes {
		a := sb.Attributes[as.Name]
		if a == nil {
			continue
		}
		r := a.Expr.Range()
		d.attrs[r.Start.Byte] = a
		val, diags := a.Expr.Value(nil)
		switch {
		case diags.HasErrors():
			d.add(diags...)
		case !val.IsWhollyKnown():
			d.errorf(r, "Incorrect attribute value type", "Inappropriate value for attribute %q: got an unknown value.", a.Name)
		case hasNull(val):
			what := "null"
			if !val.IsNull() {
				what = "a collection with a null element"
			}
			d.errorf(r, "Incorrect attribute value type", "Inappropriate value for attribute %q: got %s; leave an attribute out for its default.", a.Name, what)
		case hugeNumber(val):
			d.errorf(r, "Number out of range", "The value of %s is or holds a number that is infinite, or too large or too small to use.", a.Name)
		default:
			continue
		}
		d.refuse(r)
	}
}

// hasNull reports whether v is or holds a null.
func hasNull(v cty.Value) bool {
	found := false
	cty.Walk(v, func(_ cty.Path, v cty.Value) (bool, error) {
		found = found || v.IsNull()
		return !found, nil
	})
	return found
}

// decode decodes body into val as a Decoder does.
func (d *decoder) decode(body hcl.Body, val any) bool {
	before := d.errors
	schema, _ := gohcl.ImpliedBodySchema(val)
	d.scan(body, schema)
	d.decoded(gohcl.DecodeBody(body, nil, val))
	return d.errors == before
}

// decodePoolBlock decodes a pool block, with its header.
func (d *decoder) decodePoolBlock(b *hcl.Block) *poolBody {
	pb := &poolBody{Name: b.Labels[0], NameRange: b.LabelRanges[0], DefRange: b.DefRange}
	d.decode(b.Body, pb)
	return pb
}

// decoded records the diagnostics of a gohcl decode, less those about
// values the scan refused already; gohcl's type errors are made to point
// at the whole value and name the attribute, as the other errors do.
func (d *decoder) decoded(diags hcl.Diagnostics) {
	for _, diag := range diags {
		if diag.Summary == "Unsuitable value type" && diag.Context != nil {
			r := *diag.Context
			switch a := d.attrs[r.Start.Byte]; {
			case a == nil: // not an attribute the scan saw: as gohcl says
				d.add(diag)
			case !d.bad[r.Start.Byte]: // else reported already
				d.add(typeError(a, diag))
				d.refuse(r)
			}
			continue
		}
		if diag.Subject != nil && d.inBad(*diag.Subject) {
			continue
		}
		d.add(diag)
	}
}

// inBad reports whether r lies in a value refused already.
func (d *decoder) inBad(r hcl.Range) bool {
	for _, b := range d.badRanges {
		if r.Filename == b.Filename && r.Start.Byte >= b.Start.Byte && r.End.Byte <= b.End.Byte {
			return true
		}
	}
	return false
}

// typeError rewrites gohcl's error for a value of the wrong type into one
// on the whole value that names attribute a: "Incorrect attribute value
// type", or "Invalid value" for a number out of the field's range.
func typeError(a *hclsyntax.Attribute, diag *hcl.Diagnostic) *hcl.Diagnostic {
	why := strings.TrimPrefix(diag.Detail, "Unsuitable value: ")
	out := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Incorrect attribute value type", Subject: diag.Context}
	val, _ := a.Expr.Value(nil)
	if n, err := convert.Convert(val, cty.Number); err == nil {
		val = n // "1.5" was converted before gohcl refused it
	}
	number := val.Type() == cty.Number
	switch {
	case number && strings.HasPrefix(why, "value must be a whole number") && !val.AsBigFloat().IsInt():
		f, _ := val.AsBigFloat().Float64() // big.Float.Text can be slow
		out.Detail = fmt.Sprintf("Inappropriate value for attribute %q: a whole number is required, got %s.", a.Name, fmt.Sprint(f))
	case number && (strings.HasPrefix(why, "value must be a whole number") || strings.HasPrefix(why, "value must be between")):
		out.Summary, out.Detail = "Invalid value", fmt.Sprintf("%s is out of range.", a.Name)
	default:
		out.Detail = fmt.Sprintf("Inappropriate value for attribute %q: %s.", a.Name, why)
	}
	return out
}

// duration parses a duration attribute's text, at r, into dst when it is
// set: longer than 0, or, with zeroOK, not negative.
func (d *decoder) duration(name, text string, r hcl.Range, zeroOK bool, dst *time.Duration) state {
	if st := d.state(r); st != set {
		return st
	}
	dur, err := ParseDuration(text)
	switch {
	case err != nil:
		d.errorf(r, "Invalid duration", "%s must be %s; got %q.", name, durationForm, text)
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

// PluginUser is implemented by the settings of a pool driven by a plugin
// block: the plugin's name, and where the pool names it.
type PluginUser interface {
	PluginName() (string, hcl.Range)
}

// pluginBody is a plugin block's attributes; Rest holds its config block.
type pluginBody struct {
	Path   string            `hcl:"path"`
	SHA256 string            `hcl:"sha256"`
	Args   []string          `hcl:"args,optional"`
	Env    map[string]string `hcl:"env,optional"`
	Rest   hcl.Body          `hcl:",remain"`

	PathAt   hcl.Range `hcl:"path,attr_value_range"`
	SHA256At hcl.Range `hcl:"sha256,attr_value_range"`
	EnvAt    hcl.Range `hcl:"env,attr_value_range"`
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// decodePlugin decodes a plugin block: its executable, its SHA-256, its
// arguments and environment, and its config block, whose attributes are
// the plugin's to check (literal values, kept as JSON values with where
// each is).
func (d *decoder) decodePlugin(b *hcl.Block) Plugin {
	out := Plugin{Name: b.Labels[0], DefRange: b.DefRange, ConfigAt: map[string]hcl.Range{}}
	if !validPluginName(out.Name) {
		d.errorf(b.LabelRanges[0], "Invalid plugin name", "A plugin name is 1-63 letters, digits, dashes and underscores, got %q.", out.Name)
	}
	var v pluginBody
	if !d.decode(b.Body, &v) {
		return out
	}
	if d.nonEmpty("path", v.Path, v.PathAt) == set &&
		d.check(v.PathAt, filepath.IsAbs(v.Path), "path must be the plugin executable's absolute path (the plugin runs with its own environment, no PATH to look it up in), got %q.", v.Path) == set {
		out.Path = v.Path
	}
	if d.check(v.SHA256At, sha256Hex.MatchString(v.SHA256), "sha256 must be the executable's SHA-256, 64 lowercase hex digits (sha256sum), got %q.", v.SHA256) == set {
		out.SHA256 = v.SHA256
	}
	out.Args = v.Args
	for _, k := range slices.Sorted(maps.Keys(v.Env)) {
		val := v.Env[k]
		if !envName.MatchString(k) || strings.ContainsRune(val, 0) {
			d.errorf(v.EnvAt, "Invalid value", "env maps variable names (letters, digits and _, not starting with a digit) to values without NUL bytes; %q is not one.", k)
			continue
		}
		out.Env = append(out.Env, k+"="+val)
	}
	sort.Strings(out.Env)
	if v.Rest == nil {
		return out
	}
	content, diags := v.Rest.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "config"}}})
	d.decoded(diags)
	for i, cb := range content.Blocks {
		if i > 0 {
			d.errorf(cb.DefRange, "Duplicate config block", "A plugin has one config block; the first is at %s.", defPos(content.Blocks[0].DefRange))
			continue
		}
		vals, ats, diags := LiteralAttributes(cb.Body)
		d.decoded(diags)
		out.Config, out.ConfigAt = vals, ats
	}
	return out
}

func validPluginName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// LiteralAttributes are a block's attributes as JSON values (strings,
// numbers, bools, lists, objects), with where each value is: the
// settings a plugin checks itself. Only literal values are taken; a
// reference or a function call is an error naming it.
func LiteralAttributes(body hcl.Body) (map[string]any, map[string]hcl.Range, hcl.Diagnostics) {
	vals, ats := map[string]any{}, map[string]hcl.Range{}
	attrs, diags := body.JustAttributes()
	for name, a := range attrs {
		// Literals only, checked before anything is evaluated: a for
		// expression, a function call or a reference is refused as it is.
		if e, ok := a.Expr.(hclsyntax.Expression); ok {
			if bad := nonLiteral(e); bad != nil {
				diags = append(diags, InvalidValue(bad.Range(), "%s must be a literal value: strings, numbers, bools, lists and objects (no references, function calls, for expressions or interpolations).", name))
				continue
			}
		}
		v, vd := a.Expr.Value(nil)
		if vd.HasErrors() {
			diags = append(diags, vd...)
			continue
		}
		if !v.IsWhollyKnown() || v.IsNull() {
			diags = append(diags, InvalidValue(a.Expr.Range(), "%s must be a literal value, not null.", name))
			continue
		}
		if !exactNumbers(v) {
			diags = append(diags, InvalidValue(a.Expr.Range(), "%s holds an integer beyond 2^53, which a plugin's JSON cannot carry exactly; use a string.", name))
			continue
		}
		b, err := ctyjson.Marshal(v, v.Type())
		var out any
		if err == nil {
			err = json.Unmarshal(b, &out)
		}
		if err != nil {
			diags = append(diags, InvalidValue(a.Expr.Range(), "%s: %v.", name, err))
			continue
		}
		vals[name], ats[name] = out, a.Expr.Range()
	}
	return vals, ats, diags
}

// nonLiteral is the first part of e that is not a literal (a string with
// no interpolation, a number, a bool, a negated number, a list or object
// of literals, in parentheses or not); nil when it is all literal.
func nonLiteral(e hclsyntax.Expression) hclsyntax.Expression {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return nil
	case *hclsyntax.TemplateExpr:
		for _, part := range e.Parts {
			if _, ok := part.(*hclsyntax.LiteralValueExpr); !ok {
				return part
			}
		}
		return nil
	case *hclsyntax.ParenthesesExpr:
		return nonLiteral(e.Expression)
	case *hclsyntax.UnaryOpExpr:
		if e.Op != hclsyntax.OpNegate {
			return e
		}
		if _, ok := e.Val.(*hclsyntax.LiteralValueExpr); !ok {
			return e.Val
		}
		return nil
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			if bad := nonLiteral(x); bad != nil {
				return bad
			}
		}
		return nil
	case *hclsyntax.ObjectConsExpr:
		for _, item := range e.Items {
			key := item.KeyExpr
			if k, ok := key.(*hclsyntax.ObjectConsKeyExpr); ok {
				if hcl.ExprAsKeyword(k.Wrapped) != "" {
					key = nil // a bare name
				} else {
					key = k.Wrapped
				}
			}
			if key != nil {
				if bad := nonLiteral(key); bad != nil {
					return bad
				}
			}
			if bad := nonLiteral(item.ValueExpr); bad != nil {
				return bad
			}
		}
		return nil
	default:
		return e
	}
}

// exactNumbers reports whether every number in v is one a float64 holds
// exactly where it is an integer (|n| <= 2^53), as JSON numbers are read.
func exactNumbers(v cty.Value) bool {
	switch {
	case v.IsNull() || !v.IsKnown():
		return true
	case v.Type() == cty.Number:
		f := v.AsBigFloat()
		if !f.IsInt() {
			return true
		}
		return f.Abs(f).Cmp(big.NewFloat(1<<53)) <= 0
	case v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			if _, e := it.Element(); !exactNumbers(e) {
				return false
			}
		}
	}
	return true
}

// poolResult is a decoded pool and what cross-checks need to know about it.
type poolResult struct {
	body *poolBody
	ok   bool // decoded without error
}

func (d *decoder) decodeFile(body hcl.Body) *Config {
	cfg := Defaults()
	content, diags := body.Content(rootSchema)
	d.decoded(diags)

	var (
		pools                []poolResult
		first                = map[string]*poolBody{}
		seen                 = map[string]*hcl.Block{}
		forecast             *forecastBody
		limits               *limitsBody
		forecastOK, limitsOK = true, true
	)
	plugins := map[string]*hcl.Block{}
	for _, b := range content.Blocks {
		before := d.errors
		if b.Type == "plugin" {
			if prev, dup := plugins[b.Labels[0]]; dup {
				d.errorf(b.LabelRanges[0], "Duplicate plugin name",
					"A plugin named %q was already defined at %s; plugin names must be unique.", b.Labels[0], defPos(prev.DefRange))
				continue
			}
			plugins[b.Labels[0]] = b
			cfg.Plugins = append(cfg.Plugins, d.decodePlugin(b))
			continue
		}
		if b.Type == "pool" {
			pb := d.decodePoolBlock(b)
			p := d.decodePool(pb)
			if prev, dup := first[pb.Name]; dup {
				d.errorf(pb.NameRange, "Duplicate pool name",
					"A pool named %q was already defined at %s; pool names must be unique.", pb.Name, defPos(prev.DefRange))
				continue
			}
			first[pb.Name] = pb
			cfg.Pools = append(cfg.Pools, p)
			pools = append(pools, poolResult{body: pb, ok: d.errors == before})
			continue
		}
		if prev, dup := seen[b.Type]; dup {
			d.errorf(b.DefRange, "Duplicate "+b.Type+" block",
				"A %s block was already defined at %s; there can be only one.", b.Type, defPos(prev.DefRange))
			continue
		}
		seen[b.Type] = b
		switch b.Type {
		case "forecast":
			forecast = &forecastBody{}
			d.decode(b.Body, forecast)
			forecast.Validate(d, &cfg.Forecast)
			forecastOK = d.errors == before
		case "drain":
			var v drainBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Drain)
		case "limits":
			limits = &limitsBody{}
			d.decode(b.Body, limits)
			limits.Validate(d, &cfg.Limits)
			limitsOK = d.errors == before
		case "controller":
			var v controllerBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Controller)
		case "demand":
			var v demandBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Demand)
		case "synthetic":
			var v syntheticBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Synthetic)
		case "simulate":
			var v simulateBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Simulate)
		}
	}
	// Each plugin pool names a plugin block.
	for _, p := range cfg.Pools {
		if u, ok := p.Settings.(PluginUser); ok {
			if name, at := u.PluginName(); name != "" && plugins[name] == nil { // "": refused already
				d.errorf(at, "Unknown plugin", "Pool %q names plugin %q, which the config has no plugin %q block for.%s",
					p.Name, name, name, didYouMean(name, slices.Sorted(maps.Keys(plugins))))
			}
		}
	}
	if len(first) == 0 && !hasPoolBlock(body) {
		d.errorf(body.MissingItemRange(), "No pools", `The config must define at least one pool block, e.g. pool "gpu" { ... }.`)
	}

	for _, p := range pools {
		if !p.ok {
			return &cfg
		}
	}
	if limits != nil && limitsOK {
		checkMinimums(d, &cfg, limits)
	}
	if forecastOK {
		checkHorizon(d, &cfg, forecast, pools)
	}
	return &cfg
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

// providerNames are the names of the providers Parse was given, sorted.
func (d *decoder) providerNames() []string {
	names := make([]string, 0, len(d.providers))
	for _, p := range d.providers {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// provider returns the ProviderBlock of the named provider.
func (d *decoder) provider(name string) (ProviderBlock, bool) {
	for _, p := range d.providers {
		if p.Name == name {
			return p, true
		}
	}
	return ProviderBlock{}, false
}

// decodePool checks a pool's fields and decodes its provider block with
// its provider's decoder. A field the file got wrong is left zero.
func (d *decoder) decodePool(b *poolBody) fleet.Pool {
	p := fleet.Pool{
		Name:     b.Name,
		Provider: b.Provider,
		Region:   b.Region, Zones: b.Zones, InstanceType: b.InstanceType, GPUModel: b.GPUModel,
		Capacity: poolDefaults.Capacity,
		LeadTime: poolDefaults.LeadTime,
	}
	if p.Name == "" {
		d.errorf(b.NameRange, "Invalid pool name", "A pool name must not be empty.")
	}
	kind, known := d.provider(b.Provider)
	provSt := d.state(b.ProviderAt)
	if provSt == set && !known {
		d.errorf(b.ProviderAt, "Unknown provider", "Unknown provider %q; the known providers are %s.%s",
			b.Provider, strings.Join(d.providerNames(), ", "), didYouMean(b.Provider, d.providerNames()))
		d.refuse(b.ProviderAt)
		provSt = bad
	}
	if provSt != set {
		p.Provider = ""
	}
	d.nonEmpty("instance_type", b.InstanceType, b.InstanceTypeAt)
	if d.between("gpus_per_node", b.GPUsPerNode, 1, MaxGPUsPerNode, b.GPUsPerNodeAt) == set {
		p.GPUsPerNode = b.GPUsPerNode
	}
	switch c := fleet.CapacityType(b.Capacity); d.check(b.CapacityAt, c.Valid(),
		"Unknown capacity %q; capacity must be %q, %q or %q.%s", b.Capacity, fleet.Reserved, fleet.OnDemand, fleet.Spot,
		didYouMean(b.Capacity, []string{string(fleet.Reserved), string(fleet.OnDemand), string(fleet.Spot)})) {
	case set:
		p.Capacity = c
	case bad:
		p.Capacity = ""
	}
	if d.check(b.PricePerHourAt, b.PricePerHour >= 0, "price_per_hour must not be negative, got %g.", b.PricePerHour) == set {
		p.PricePerHour = b.PricePerHour
	}
	leadSt := d.duration("lead_time", b.LeadTime, b.LeadTimeAt, false, &p.LeadTime)
	switch d.duration("provision_timeout", b.ProvisionTimeout, b.ProvisionTimeoutAt, false, &p.ProvisionTimeout) {
	case unset:
		p.ProvisionTimeout = p.LeadTime * time.Duration(poolDefaults.ProvisionTimeoutFactor)
		if p.ProvisionTimeout/time.Duration(poolDefaults.ProvisionTimeoutFactor) != p.LeadTime {
			p.ProvisionTimeout = math.MaxInt64 // the product overflowed
		}
	case set:
		if leadSt != bad && p.ProvisionTimeout < p.LeadTime {
			d.invalid(b.ProvisionTimeoutAt, "provision_timeout (%s) must not be shorter than lead_time (%s).", p.ProvisionTimeout, p.LeadTime)
		}
	}
	minSt := d.between("min", b.Min, 0, MaxPoolNodes, b.MinAt)
	maxSt := d.between("max", b.Max, 1, MaxPoolNodes, b.MaxAt)
	if minSt == set || minSt == unset {
		p.Min = b.Min
	}
	if maxSt == set {
		p.Max = b.Max
	}
	if minSt == set && maxSt == set && p.Min > p.Max {
		d.invalid(b.MinAt, "min (%d) is greater than max (%d).", p.Min, p.Max)
	}
	p.Priority = b.Priority

	// The provider block. The schema names the pool's attributes too, so
	// that a misspelt one gets a suggestion.
	if b.Rest == nil {
		return p
	}
	schema, _ := gohcl.ImpliedBodySchema(b)
	for i := range schema.Attributes {
		schema.Attributes[i].Required = false // decoded already
	}
	byBlock, byAttr := map[string]ProviderBlock{}, map[string]ProviderBlock{}
	for _, name := range d.providerNames() {
		kind, _ := d.provider(name)
		byBlock[kind.blockType()] = kind
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: kind.blockType()})
		if kind.Attribute != "" {
			byAttr[kind.Attribute] = kind
			schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: kind.Attribute})
		}
	}
	content, diags := b.Rest.Content(schema)
	d.decoded(diags)
	var in ProviderInput
	for name, attr := range content.Attributes {
		owner, ok := byAttr[name]
		switch {
		case !ok:
			continue // the pool's own, decoded already
		case provSt == set && owner.Name != p.Provider:
			d.errorf(attr.NameRange, "Wrong provider attribute",
				"Pool %q has provider = %q, so it cannot set %s: that is for provider = %q pools.", p.Name, p.Provider, name, owner.Name)
		default:
			in.Attribute = attr
		}
	}
	seen := map[string]*hcl.Block{}
	for _, pb := range content.Blocks {
		if prev, dup := seen[pb.Type]; dup {
			d.errorf(pb.DefRange, "Duplicate "+pb.Type+" block",
				"A %s block was already defined at %s; a pool has one provider block.", pb.Type, defPos(prev.DefRange))
			continue
		}
		seen[pb.Type] = pb
		if provSt == set && pb.Type != kind.blockType() {
			d.errorf(pb.DefRange, "Wrong provider block",
				"Pool %q has provider = %q, so it cannot have %s block; its settings go in %s block.", p.Name, p.Provider, withArticle(pb.Type), withArticle(kind.blockType()))
			continue
		}
		if provSt != set {
			// The pool's provider is wrong or missing: the block is
			// decoded by its own kind, for its errors.
			if other, ok := byBlock[pb.Type]; ok {
				_, diags := other.Decode(ProviderInput{Block: pb}, p, d.decode)
				d.decoded(diags)
			}
			continue
		}
		in.Block = pb
	}
	if provSt != set {
		return p
	}
	if kind.Attribute != "" && in.Attribute == nil {
		d.errorf(b.ProviderAt, "Missing required argument", "Pool %q has provider = %q and needs %s = ...", p.Name, p.Provider, kind.Attribute)
		if in.Block != nil { // decoded for its own errors
			_, diags := kind.Decode(in, p, d.decode)
			d.decoded(diags)
		}
		return p
	}
	if in.Block == nil && !kind.Optional {
		d.errorf(b.ProviderAt, "Missing provider block", "Pool %q has provider = %q and needs %s block.", p.Name, p.Provider, withArticle(kind.blockType()))
		return p
	}
	settings, diags := kind.Decode(in, p, d.decode)
	d.decoded(diags)
	p.Settings = settings
	return p
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

// Validate checks the controller block and fills out: durations, a listen
// address (plain HTTP only on loopback or with insecure), a fleet name a
// tag can hold, and TLS files in pairs. Every error points at the value it refuses.
func (c *controllerBody) Validate(d *decoder, out *Controller) {
	d.duration("interval", c.Interval, c.IntervalAt, false, &out.Interval)
	d.duration("agent_timeout", c.AgentTimeout, c.AgentTimeoutAt, false, &out.AgentTimeout)
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
}

// Validate checks the demand block and fills out: an http(s) Prometheus URL
// and a query, each needing the other, and backfill only with them. Every
// error points at the value it refuses.
func (dm *demandBody) Validate(d *decoder, out *Demand) {
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
func (s *simulateBody) Validate(d *decoder, out *Simulate) {
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
	if d.check(s.ReservationsAt, slices.Contains(ReservationModes, s.Reservations),
		"reservations must be %q (every policy holds the configured reservations) or %q (the predictive policy follows the baseline advice), got %q.",
		ReservationsConfigured, ReservationsAdvised, s.Reservations) == set {
		out.Reservations = s.Reservations
	}
	d.duration("advice_after", s.AdviceAfter, s.AdviceAfterAt, false, &out.AdviceAfter)
	if d.atLeast("headroom_gpus", s.HeadroomGPUs, 0, s.HeadroomGPUsAt) == set {
		out.HeadroomGPUs = s.HeadroomGPUs
	}
	if d.check(s.HeadroomPlaceholdersAt, slices.Contains(PlaceholderSizes, s.HeadroomPlaceholders),
		"headroom_placeholders must be %q (each as wide as a node: the buffer is whole empty nodes) or %q (one GPU each: the buffer also fills busy nodes' fragments), got %q.",
		PlaceholdersNode, PlaceholdersGPU, s.HeadroomPlaceholders) == set {
		out.HeadroomPlaceholders = s.HeadroomPlaceholders
	}
}

// maxCheckpointDuration bounds simulate.checkpoint_duration.
const maxCheckpointDuration = 24 * time.Hour

// Validate checks the synthetic block and fills out: GPU counts not
// negative, peak >= base, an hour of the day, and noise not negative. Every error points at the value it refuses.
func (s *syntheticBody) Validate(d *decoder, out *Synthetic) {
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

// defPos formats the start of r as FILE:LINE:COL.
func defPos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// withArticle returns "a sim", "an aws".
func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// hasPoolBlock reports whether body has a pool block, even one that gohcl
// dropped for having the wrong number of labels (already an error).
func hasPoolBlock(body hcl.Body) bool {
	if sb, ok := body.(*hclsyntax.Body); ok {
		for _, b := range sb.Blocks {
			if b.Type == "pool" {
				return true
			}
		}
	}
	return false
}
