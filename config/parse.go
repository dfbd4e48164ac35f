package config

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	neturl "net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/fleetcast/autoscaler/fleet"
)

// Target keys. A pool's provider block is stored in fleet.Pool.Target with
// one entry per attribute, keyed by the attribute name, as a string: numbers
// are formatted with strconv (Itoa, FormatFloat 'g'), lists of strings are
// joined. Two attributes need more than one key or a separator:
//
//   - plugin "args" is joined with ArgsSeparator (the ASCII unit separator,
//     which no sensible argument contains), and is absent when not given;
//   - plugin "target" (a map) is stored as one entry per map key, keyed
//     "target.KEY".
//
// A sim pool always has the keys "capacity", "capacity_error_rate" and
// "initial", with defaults applied, so consumers can parse them unchecked.
const (
	// ArgsSeparator joins a plugin's args in Target["args"].
	ArgsSeparator = "\x1f"
	// PluginTargetPrefix prefixes the keys of a plugin's target map in Target.
	PluginTargetPrefix = "target."
)

// providerNames are the known providers, sorted.
var providerNames = []string{fleet.ProviderAWS, fleet.ProviderGCP, fleet.ProviderPlugin, fleet.ProviderSim}

// drainSignals are the signals drain.signal may name. SIGKILL and SIGSTOP
// cannot be caught, so they cannot ask a job to checkpoint.
var drainSignals = []string{"SIGALRM", "SIGCONT", "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGWINCH"}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "pool", LabelNames: []string{"name"}},
		{Type: "forecast"},
		{Type: "drain"},
		{Type: "limits"},
		{Type: "controller"},
		{Type: "demand"},
		{Type: "synthetic"},
		{Type: "simulate"},
	},
}

var poolSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "provider", Required: true},
		{Name: "region"},
		{Name: "zones"},
		{Name: "instance_type", Required: true},
		{Name: "gpu_model"},
		{Name: "gpus_per_node", Required: true},
		{Name: "capacity"},
		{Name: "price_per_hour", Required: true},
		{Name: "lead_time"},
		{Name: "provision_timeout"},
		{Name: "min"},
		{Name: "max", Required: true},
		{Name: "priority"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: fleet.ProviderAWS}, {Type: fleet.ProviderGCP}, {Type: fleet.ProviderSim}, {Type: fleet.ProviderPlugin}},
}

var providerSchemas = map[string]*hcl.BodySchema{
	fleet.ProviderAWS: attrSchema(nil, "asg", "asg_tag", "launch_template", "launch_template_version", "subnet_id",
		"capacity_reservation_id", "capacity_block", "spot_price_lookup", "endpoint"),
	fleet.ProviderGCP:    attrSchema([]string{"project", "zone", "mig"}, "endpoint"),
	fleet.ProviderSim:    attrSchema(nil, "capacity", "capacity_error_rate", "initial"),
	fleet.ProviderPlugin: attrSchema([]string{"command"}, "args", "target"),
}

var (
	forecastSchema   = attrSchema(nil, "step", "horizon", "quantile", "history", "hysteresis")
	drainSchema      = attrSchema(nil, "checkpoint_max_age", "timeout", "signal", "long_running_after")
	limitsSchema     = attrSchema(nil, "max_gpus", "max_spend_per_hour", "max_scale_in_per_cycle", "scale_in_share", "scale_in_window", "silent_share_halt")
	controllerSchema = attrSchema(nil, "interval", "listen", "state_dir", "agent_timeout", "fleet",
		"tls_cert_file", "tls_key_file", "insecure", "bootstrap_token_file", "aws_identity_certificates")
	demandSchema    = attrSchema(nil, "prometheus_url", "prometheus_query", "prometheus_timeout")
	syntheticSchema = attrSchema(nil, "seed", "base_gpus", "peak_gpus", "peak_hour", "noise")
	simulateSchema  = attrSchema(nil, "checkpoint_interval", "spot_interruptions_per_hour", "spot_notice", "checkpoint_duration", "unresponsive_jobs",
		"reservations", "advice_after", "headroom_gpus", "headroom_placeholders")
)

func attrSchema(required []string, optional ...string) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, n := range required {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: n, Required: true})
	}
	for _, n := range optional {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: n})
	}
	return s
}

// MaxFileSize is the largest config file Load and Parse accept: 256 KiB.
// A fleet config is a few kilobytes of HCL (the examples are under 4 KB);
// a file near this size is not one (a binary, a log, a file generated
// wrong). HCL's parser builds every token and every error of a file before
// it returns: on a megabyte of bad HCL that takes seconds and half a
// gigabyte, on this much a fraction of a second and at most about 150 MB.
const MaxFileSize = 256 << 10

// MaxNesting is how deeply Parse lets brackets, braces, parentheses,
// quotes and template sequences nest, and MaxLineTokens how many tokens one
// line may hold (a line continues while a parenthesis or bracket is open,
// as in HCL). HCL's parser recurses at each level of an expression, and on
// deeply nested input takes seconds and gigabytes; a fleet config nests
// three or four deep and its longest line holds a few dozen tokens.
const (
	MaxNesting    = 32
	MaxLineTokens = 4096
)

// MaxDiagnostics is the most diagnostics Parse returns: the first ones in
// the file. When there are more, one last diagnostic stands for the rest
// (its Extra is an Omitted).
const MaxDiagnostics = 30

// Omitted is the Extra of the diagnostic that ends a list Parse cut at
// MaxDiagnostics: how many errors and warnings were left out.
type Omitted struct {
	Errors, Warnings int
}

// Load reads the config file at path and parses it with Parse. A read error
// is returned as an error diagnostic whose detail names the file; a file
// larger than MaxFileSize is refused without reading it.
func Load(path string) (*Config, hcl.Diagnostics) {
	cannot := func(err error) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read config file",
			Detail:   err.Error(),
		}}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, cannot(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileSize {
		return nil, hcl.Diagnostics{tooLarge(path, fi.Size(), "")}
	}
	// One byte more than the limit tells a file at the limit from a larger
	// one that Stat cannot size (a pipe, a device).
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, cannot(fmt.Errorf("read %s: %w", path, err))
	}
	if len(src) > MaxFileSize {
		return nil, hcl.Diagnostics{tooLarge(path, MaxFileSize, "more than ")}
	}
	return Parse(path, src)
}

// Parse parses src, a config in native HCL syntax read from filename, and
// validates it. It returns the config with every default applied, or nil and
// the diagnostics when there is any error. All errors are collected in one
// pass, sorted by position; each has a Subject pointing at the offending
// value, attribute or block. At most MaxDiagnostics are returned, the
// first in the file, and then one standing for the rest (see Omitted).
// Warnings, if any, are returned with the config. Input larger than
// MaxFileSize, that is not text (a NUL byte, bytes that are not UTF-8),
// or that nests deeper than MaxNesting or has a line of more than
// MaxLineTokens tokens, is refused with one error before HCL parses it.
func Parse(filename string, src []byte) (*Config, hcl.Diagnostics) {
	if len(src) > MaxFileSize {
		return nil, hcl.Diagnostics{tooLarge(filename, int64(len(src)), "")}
	}
	if diag := notText(filename, src); diag != nil {
		return nil, hcl.Diagnostics{diag}
	}
	if diag := tooDeep(filename, src); diag != nil {
		return nil, hcl.Diagnostics{diag}
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, capDiagnostics(diags)
	}
	if diags = append(diags, checkNumbers(file.Body)...); diags.HasErrors() {
		return nil, capDiagnostics(diags)
	}
	d := &decoder{}
	d.add(diags...)
	cfg := d.decodeFile(file.Body)
	diags = capDiagnostics(d.diags)
	if d.errors > 0 {
		return nil, diags
	}
	return cfg, diags
}

// tooLarge is the error for a config file of size bytes (at least, when
// atLeast says "more than ").
func tooLarge(filename string, size int64, atLeast string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Config file too large",
		Detail: fmt.Sprintf("%s is %s%d bytes; a config file may have at most %d (%d KiB). A fleet config is a few kilobytes of HCL: is this the right file?",
			filename, atLeast, size, MaxFileSize, MaxFileSize>>10),
		Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
	}
}

// notText returns an error at the first byte of src that text cannot
// hold: a NUL byte, or one that is not part of a UTF-8 character. Nil when
// there is none.
func notText(filename string, src []byte) *hcl.Diagnostic {
	i := 0
	for i < len(src) {
		if c := src[i]; c != 0 && c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r != 0 && (r != utf8.RuneError || size > 1) {
			i += size
			continue
		}
		what := fmt.Sprintf("byte 0x%02x at offset %d is not UTF-8", src[i], i)
		if r == 0 {
			what = fmt.Sprintf("byte 0x00 (NUL) at offset %d", i)
		}
		line := 1 + bytes.Count(src[:i], []byte("\n"))
		col := 1 + utf8.RuneCount(src[bytes.LastIndexByte(src[:i], '\n')+1:i])
		pos := hcl.Pos{Line: line, Column: col, Byte: i}
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Not a text file",
			Detail:   fmt.Sprintf("%s (line %d, column %d): a config is UTF-8 text (HCL); is %s a binary file?", what, line, col, filename),
			Subject:  &hcl.Range{Filename: filename, Start: pos, End: hcl.Pos{Line: line, Column: col + 1, Byte: i + 1}},
		}
	}
	return nil
}

// tooDeep returns an error at the first token of src that nests deeper
// than MaxNesting, or that makes its line longer than MaxLineTokens tokens;
// nil when there is none. It reads HCL's tokens, so brackets in strings
// and comments do not count.
func tooDeep(filename string, src []byte) *hcl.Diagnostic {
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos) // the parser reports bad tokens
	var open []hclsyntax.TokenType
	line := 0 // tokens on the line so far
	// continued is whether a line's end continues the line, as it does in
	// parentheses and brackets.
	continued := func() bool {
		return len(open) > 0 && (open[len(open)-1] == hclsyntax.TokenOParen || open[len(open)-1] == hclsyntax.TokenOBrack)
	}
	for i := range tokens {
		tok := &tokens[i]
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if open = append(open, tok.Type); len(open) > MaxNesting {
				return &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Nesting too deep",
					Detail: fmt.Sprintf("More than %d brackets, braces, parentheses, quotes or template sequences are open here, in %s; a fleet config nests a few levels deep.",
						MaxNesting, filename),
					Subject: tok.Range.Ptr(),
				}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case hclsyntax.TokenComment:
			// A line comment holds its line's end.
			if bytes.HasSuffix(tok.Bytes, []byte("\n")) && !continued() {
				line = 0
				continue
			}
		case hclsyntax.TokenNewline:
			if !continued() {
				line = 0
			}
			continue
		}
		if line++; line > MaxLineTokens {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Line too long",
				Detail: fmt.Sprintf("More than %d tokens on one line (an open parenthesis or bracket continues it), in %s; a fleet config's lines hold a few dozen.",
					MaxLineTokens, filename),
				Subject: tok.Range.Ptr(),
			}
		}
	}
	return nil
}

// capDiagnostics sorts diags by position and keeps the first
// MaxDiagnostics, then one error (or warning) whose Extra, an Omitted,
// counts the rest.
func capDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	sortDiagnostics(diags)
	if len(diags) <= MaxDiagnostics {
		return diags
	}
	var o Omitted
	for _, diag := range diags[MaxDiagnostics:] {
		if diag.Severity == hcl.DiagError {
			o.Errors++
		} else {
			o.Warnings++
		}
	}
	last := &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "More warnings", Extra: o}
	if o.Errors > 0 {
		last.Severity, last.Summary = hcl.DiagError, "More errors"
	}
	return append(diags[:MaxDiagnostics:MaxDiagnostics], last)
}

// String is "... and N more errors", with the warnings if there are any.
func (o Omitted) String() string {
	plural := func(n int, what string) string {
		if n == 1 {
			return "1 more " + what
		}
		return fmt.Sprintf("%d more %ss", n, what)
	}
	switch {
	case o.Warnings == 0:
		return "... and " + plural(o.Errors, "error")
	case o.Errors == 0:
		return "... and " + plural(o.Warnings, "warning")
	}
	return "... and " + plural(o.Errors, "error") + " and " + plural(o.Warnings, "warning")
}

// ErrorCount is the number of errors diags hold or stand for (see
// Omitted).
func ErrorCount(diags hcl.Diagnostics) int {
	n := 0
	for _, diag := range diags {
		if o, ok := diag.Extra.(Omitted); ok {
			n += o.Errors
		} else if diag.Severity == hcl.DiagError {
			n++
		}
	}
	return n
}

// WriteDiagnostics writes diags to w, one line each, in the form
//
//	FILE:LINE:COL: error: SUMMARY: DETAIL
//
// The position is the start of the diagnostic's subject and is left out when
// there is none; newlines in the detail become spaces.
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	for _, diag := range diags {
		if _, err := io.WriteString(w, FormatDiagnostic(diag)+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// FormatDiagnostic formats one diagnostic as a single line, as
// WriteDiagnostics writes it, without the newline. The one standing for
// those Parse left out reads "... and N more errors".
func FormatDiagnostic(diag *hcl.Diagnostic) string {
	if o, ok := diag.Extra.(Omitted); ok {
		return o.String()
	}
	var b strings.Builder
	if r := diag.Subject; r != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", r.Filename, r.Start.Line, r.Start.Column)
	}
	if diag.Severity == hcl.DiagWarning {
		b.WriteString("warning: ")
	} else {
		b.WriteString("error: ")
	}
	b.WriteString(diag.Summary)
	if diag.Detail != "" {
		b.WriteString(": ")
		b.WriteString(strings.NewReplacer("\r\n", " ", "\n", " ").Replace(diag.Detail))
	}
	return b.String()
}

// maxExponent bounds the binary exponent of number literals: a little beyond
// float64's range, so that no number in a config is too big or too small to
// use, and converting one to a string (which HCL does in templates) stays
// cheap. HCL numbers are arbitrary-precision; formatting 1e99999999 as a
// string would take hours.
const maxExponent = 1100

// hugeNumber reports whether v is or holds a number out of range, which
// could take hours to convert to a string.
func hugeNumber(v cty.Value) bool {
	huge := false
	cty.Walk(v, func(_ cty.Path, v cty.Value) (bool, error) {
		if v.Type() == cty.Number && v.IsKnown() && !v.IsNull() {
			exp := v.AsBigFloat().MantExp(nil)
			huge = huge || exp > maxExponent || exp < -maxExponent
		}
		return !huge, nil
	})
	return huge
}

// checkNumbers reports number literals out of range, and string literals
// that would convert to such numbers. They are errors before evaluation,
// because evaluating them can hang.
func checkNumbers(body hcl.Body) hcl.Diagnostics {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil
	}
	var diags hcl.Diagnostics
	hclsyntax.VisitAll(sb, func(n hclsyntax.Node) hcl.Diagnostics {
		lit, ok := n.(*hclsyntax.LiteralValueExpr)
		if !ok || lit.Val.IsNull() || !lit.Val.IsKnown() {
			return nil
		}
		num := lit.Val
		if num.Type() == cty.String {
			var err error
			if num, err = cty.ParseNumberVal(num.AsString()); err != nil {
				return nil // not a number
			}
		}
		if num.Type() != cty.Number {
			return nil
		}
		if exp := num.AsBigFloat().MantExp(nil); exp > maxExponent || exp < -maxExponent {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Number out of range",
				Detail:   "This number is too large or too small to use.",
				Subject:  lit.SrcRange.Ptr(),
			})
		}
		return nil
	})
	return diags
}

// sortDiagnostics orders diags by position, those without a subject first.
func sortDiagnostics(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		default:
			return a.Start.Byte < b.Start.Byte
		}
	})
}

// state is what became of an attribute.
type state uint8

const (
	unset state = iota // absent: the default applies
	set                // present and valid
	bad                // present and invalid; an error was recorded
)

// decoder collects diagnostics while decoding, and counts its errors.
type decoder struct {
	diags  hcl.Diagnostics
	errors int
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
	d.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// invalid records an "Invalid value" error on the value of attribute name,
// which must be present, and returns bad.
func (d *decoder) invalid(attrs hcl.Attributes, name, format string, args ...any) state {
	d.errorf(attrs[name].Expr.Range(), "Invalid value", format, args...)
	return bad
}

// errorCount is the number of errors recorded so far.
func (d *decoder) errorCount() int { return d.errors }

func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	content, diags := body.Content(schema)
	d.add(diags...)
	return content
}

// value evaluates attribute name, if present, and converts it to ty; want
// names ty in the error message.
func (d *decoder) value(attrs hcl.Attributes, name string, ty cty.Type, want string) (cty.Value, state) {
	attr, ok := attrs[name]
	if !ok {
		return cty.NilVal, unset
	}
	val, diags := attr.Expr.Value(nil)
	d.add(diags...)
	if diags.HasErrors() {
		return cty.NilVal, bad
	}
	typeErr := func(got string) (cty.Value, state) {
		d.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: %s is required, got %s.", name, want, got)
		return cty.NilVal, bad
	}
	if !val.IsWhollyKnown() {
		return typeErr("an unknown value")
	}
	if val.IsNull() {
		return typeErr("null")
	}
	if hugeNumber(val) {
		d.errorf(attr.Expr.Range(), "Number out of range", "The value of %s is or holds a number too large or too small to use.", name)
		return cty.NilVal, bad
	}
	conv, err := convert.Convert(val, ty)
	if err != nil {
		return typeErr(val.Type().FriendlyName())
	}
	if ty.IsCollectionType() {
		for it := conv.ElementIterator(); it.Next(); {
			if _, elem := it.Element(); elem.IsNull() {
				return typeErr("a collection with a null element")
			}
		}
	}
	return conv, set
}

func (d *decoder) str(attrs hcl.Attributes, name string, dst *string) state {
	v, st := d.value(attrs, name, cty.String, "a string")
	if st == set {
		*dst = v.AsString()
	}
	return st
}

// nonEmpty decodes a string attribute that must not be empty when given.
func (d *decoder) nonEmpty(attrs hcl.Attributes, name string, dst *string) state {
	st := d.str(attrs, name, dst)
	if st == set && *dst == "" {
		st = d.invalid(attrs, name, "%s must not be empty.", name)
	}
	return st
}

func (d *decoder) strList(attrs hcl.Attributes, name string, dst *[]string) state {
	v, st := d.value(attrs, name, cty.List(cty.String), "a list of strings")
	if st == set {
		out := make([]string, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, elem := it.Element()
			out = append(out, elem.AsString())
		}
		*dst = out
	}
	return st
}

func (d *decoder) strMap(attrs hcl.Attributes, name string, dst *map[string]string) state {
	v, st := d.value(attrs, name, cty.Map(cty.String), "a map of strings")
	if st == set {
		out := make(map[string]string, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, elem := it.Element()
			out[k.AsString()] = elem.AsString()
		}
		*dst = out
	}
	return st
}

func (d *decoder) boolean(attrs hcl.Attributes, name string, dst *bool) state {
	v, st := d.value(attrs, name, cty.Bool, "true or false")
	if st == set {
		*dst = v.True()
	}
	return st
}

func (d *decoder) number(attrs hcl.Attributes, name string, dst *float64) state {
	v, st := d.value(attrs, name, cty.Number, "a number")
	if st != set {
		return st
	}
	f, _ := v.AsBigFloat().Float64()
	if math.IsInf(f, 0) {
		return d.invalid(attrs, name, "%s is out of range.", name)
	}
	*dst = f
	return set
}

func (d *decoder) integer(attrs hcl.Attributes, name string, dst *int) state {
	v, st := d.value(attrs, name, cty.Number, "a whole number")
	if st != set {
		return st
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		f, _ := bf.Float64() // big.Float.Text can be slow
		d.errorf(attrs[name].Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: a whole number is required, got %s.", name, strconv.FormatFloat(f, 'g', -1, 64))
		return bad
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < math.MinInt || i > math.MaxInt {
		return d.invalid(attrs, name, "%s is out of range.", name)
	}
	*dst = int(i)
	return set
}

// atLeast decodes an integer attribute that must be lo or more when given.
func (d *decoder) atLeast(attrs hcl.Attributes, name string, lo int, dst *int) state {
	st := d.integer(attrs, name, dst)
	if st == set && *dst < lo {
		st = d.invalid(attrs, name, "%s must be %d or more, got %d.", name, lo, *dst)
	}
	return st
}

// duration decodes a duration attribute that must be longer than 0.
func (d *decoder) duration(attrs hcl.Attributes, name string, dst *time.Duration) state {
	dur, text, st := d.anyDuration(attrs, name)
	if st != set {
		return st
	}
	if dur <= 0 {
		return d.invalid(attrs, name, "%s must be longer than 0, got %q.", name, text)
	}
	*dst = dur
	return set
}

// durationAtLeast0 decodes a duration attribute that may be 0 but not
// negative.
func (d *decoder) durationAtLeast0(attrs hcl.Attributes, name string, dst *time.Duration) state {
	dur, text, st := d.anyDuration(attrs, name)
	if st != set {
		return st
	}
	if dur < 0 {
		return d.invalid(attrs, name, "%s must not be negative (0 for at once), got %q.", name, text)
	}
	*dst = dur
	return set
}

// anyDuration decodes a duration attribute of any sign, returning it and
// its text.
func (d *decoder) anyDuration(attrs hcl.Attributes, name string) (time.Duration, string, state) {
	v, st := d.value(attrs, name, cty.String, "a duration string")
	if st != set {
		return 0, "", st
	}
	dur, err := ParseDuration(v.AsString())
	if err != nil {
		d.errorf(attrs[name].Expr.Range(), "Invalid duration",
			"%s must be %s; got %q.", name, durationForm, v.AsString())
		return 0, "", bad
	}
	return dur, v.AsString(), set
}

// saturatingMul multiplies non-negative a and b, capped at math.MaxInt.
func saturatingMul(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// defPos formats the start of r as FILE:LINE:COL.
func defPos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// poolResult is a decoded pool and what cross-checks need to know about it.
type poolResult struct {
	block *hcl.Block
	attrs hcl.Attributes
	ok    bool // decoded without error
}

func (d *decoder) decodeFile(body hcl.Body) *Config {
	cfg := Defaults()
	content := d.content(body, rootSchema)

	var pools []poolResult
	poolBlocks := map[string]*hcl.Block{}
	blocks := map[string]*hcl.Block{}
	blockAttrs := map[string]hcl.Attributes{}
	blockOK := map[string]bool{}
	for _, b := range content.Blocks {
		if b.Type == "pool" {
			name := b.Labels[0]
			if first, dup := poolBlocks[name]; dup {
				d.errorf(b.LabelRanges[0], "Duplicate pool name",
					"A pool named %q was already defined at %s; pool names must be unique.", name, defPos(first.DefRange))
				d.decodePool(b) // for the errors in it
				continue
			}
			poolBlocks[name] = b
			before := d.errorCount()
			p, attrs := d.decodePool(b)
			cfg.Pools = append(cfg.Pools, p)
			pools = append(pools, poolResult{block: b, attrs: attrs, ok: d.errorCount() == before})
			continue
		}
		if first, dup := blocks[b.Type]; dup {
			d.errorf(b.DefRange, "Duplicate "+b.Type+" block",
				"A %s block was already defined at %s; there can be only one.", b.Type, defPos(first.DefRange))
			continue
		}
		blocks[b.Type] = b
		before := d.errorCount()
		switch b.Type {
		case "forecast":
			blockAttrs[b.Type] = d.decodeForecast(b.Body, &cfg.Forecast)
		case "drain":
			blockAttrs[b.Type] = d.decodeDrain(b.Body, &cfg.Drain)
		case "limits":
			blockAttrs[b.Type] = d.decodeLimits(b.Body, &cfg.Limits)
		case "controller":
			blockAttrs[b.Type] = d.decodeController(b.Body, &cfg.Controller)
		case "demand":
			blockAttrs[b.Type] = d.decodeDemand(b.Body, &cfg.Demand)
		case "synthetic":
			blockAttrs[b.Type] = d.decodeSynthetic(b.Body, &cfg.Synthetic)
		case "simulate":
			blockAttrs[b.Type] = d.decodeSimulate(b.Body, &cfg.Simulate)
		}
		blockOK[b.Type] = d.errorCount() == before
	}
	if len(poolBlocks) == 0 && !hasPoolBlock(body) {
		d.errorf(body.MissingItemRange(), "No pools", `The config must define at least one pool block, e.g. pool "gpu" { ... }.`)
	}

	poolsOK := true
	for _, p := range pools {
		poolsOK = poolsOK && p.ok
	}
	if !poolsOK {
		return &cfg
	}

	// limits.max_gpus must leave room for every pool's minimum.
	if lim := blockAttrs["limits"]; blockOK["limits"] && lim["max_gpus"] != nil && cfg.Limits.MaxGPUs > 0 {
		sum := 0
		for i := range cfg.Pools {
			sum += saturatingMul(cfg.Pools[i].Min, cfg.Pools[i].GPUsPerNode)
			sum = min(sum, math.MaxInt/2)
		}
		if sum > cfg.Limits.MaxGPUs {
			d.invalid(lim, "max_gpus", "The pools' min nodes hold %d GPUs together, more than max_gpus (%d).", sum, cfg.Limits.MaxGPUs)
		}
	}

	// The forecast must reach past the longest lead time plus the hysteresis.
	if fc := blockAttrs["forecast"]; blocks["forecast"] == nil || blockOK["forecast"] {
		longest := -1
		for i := range cfg.Pools {
			if longest < 0 || cfg.Pools[i].LeadTime > cfg.Pools[longest].LeadTime {
				longest = i
			}
		}
		if longest >= 0 {
			p := &cfg.Pools[longest]
			f := &cfg.Forecast
			need := time.Duration(math.MaxInt64)
			if p.LeadTime <= need-f.Hysteresis {
				need = p.LeadTime + f.Hysteresis
			}
			if f.Horizon < need {
				detail := fmt.Sprintf("The forecast horizon (%s) must reach past pool %q's lead_time (%s) plus the hysteresis (%s), i.e. be at least %s.",
					f.Horizon, p.Name, p.LeadTime, f.Hysteresis, need)
				pa := pools[longest].attrs
				switch {
				case fc["horizon"] != nil:
					d.invalid(fc, "horizon", "%s", detail)
				case fc["hysteresis"] != nil:
					d.invalid(fc, "hysteresis", "%s", detail)
				case pa["lead_time"] != nil:
					d.invalid(pa, "lead_time", "%s", detail)
				default: // not reached with the shipped defaults
					d.errorf(pools[longest].block.DefRange, "Invalid value", "%s", detail)
				}
			}
		}
	}
	return &cfg
}

// withArticle returns "a sim", "an aws".
func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// hasPoolBlock reports whether body has a pool block, even one that Content
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

func (d *decoder) decodePool(b *hcl.Block) (fleet.Pool, hcl.Attributes) {
	p := fleet.Pool{
		Name:     b.Labels[0],
		Capacity: poolDefaults.Capacity,
		LeadTime: poolDefaults.LeadTime,
	}
	if p.Name == "" {
		d.errorf(b.LabelRanges[0], "Invalid pool name", "A pool name must not be empty.")
	}
	content := d.content(b.Body, poolSchema)
	a := content.Attributes

	provSt := d.str(a, "provider", &p.Provider)
	if provSt == set && !slices.Contains(providerNames, p.Provider) {
		d.errorf(a["provider"].Expr.Range(), "Unknown provider",
			"Unknown provider %q; the known providers are %s.", p.Provider, strings.Join(providerNames, ", "))
		provSt = bad
	}
	d.str(a, "region", &p.Region)
	d.strList(a, "zones", &p.Zones)
	d.nonEmpty(a, "instance_type", &p.InstanceType)
	d.str(a, "gpu_model", &p.GPUModel)
	d.atLeast(a, "gpus_per_node", 1, &p.GPUsPerNode)
	var capacity string
	if d.str(a, "capacity", &capacity) == set {
		if c := fleet.CapacityType(capacity); c.Valid() {
			p.Capacity = c
		} else {
			d.invalid(a, "capacity", "Unknown capacity %q; capacity must be %q, %q or %q.", capacity, fleet.Reserved, fleet.OnDemand, fleet.Spot)
		}
	}
	if d.number(a, "price_per_hour", &p.PricePerHour) == set && p.PricePerHour < 0 {
		d.invalid(a, "price_per_hour", "price_per_hour must not be negative, got %g.", p.PricePerHour)
	}
	leadSt := d.duration(a, "lead_time", &p.LeadTime)
	timeoutSt := d.duration(a, "provision_timeout", &p.ProvisionTimeout)
	if timeoutSt == unset {
		p.ProvisionTimeout = p.LeadTime * time.Duration(poolDefaults.ProvisionTimeoutFactor)
		if p.ProvisionTimeout/time.Duration(poolDefaults.ProvisionTimeoutFactor) != p.LeadTime {
			p.ProvisionTimeout = math.MaxInt64 // the product overflowed
		}
	} else if timeoutSt == set && leadSt != bad && p.ProvisionTimeout < p.LeadTime {
		d.invalid(a, "provision_timeout", "provision_timeout (%s) must not be shorter than lead_time (%s).", p.ProvisionTimeout, p.LeadTime)
	}
	minSt := d.atLeast(a, "min", 0, &p.Min)
	maxSt := d.atLeast(a, "max", 1, &p.Max)
	if minSt == set && maxSt == set && p.Min > p.Max {
		d.invalid(a, "min", "min (%d) is greater than max (%d).", p.Min, p.Max)
	}
	d.integer(a, "priority", &p.Priority)

	// The provider block.
	seen := map[string]*hcl.Block{}
	for _, pb := range content.Blocks {
		if first, dup := seen[pb.Type]; dup {
			d.errorf(pb.DefRange, "Duplicate "+pb.Type+" block",
				"A %s block was already defined at %s; a pool has one provider block.", pb.Type, defPos(first.DefRange))
			continue
		}
		seen[pb.Type] = pb
		if provSt == set && pb.Type != p.Provider {
			d.errorf(pb.DefRange, "Wrong provider block",
				"Pool %q has provider = %q, so it cannot have %s block; its settings go in %s block.", p.Name, p.Provider, withArticle(pb.Type), withArticle(p.Provider))
			continue
		}
		target := map[string]string{}
		d.decodeProvider(pb, &p, target, maxSt == set)
		if provSt == set {
			p.Target = target
		}
	}
	if provSt == set && seen[p.Provider] == nil {
		if p.Provider == fleet.ProviderSim {
			p.Target = map[string]string{}
			d.decodeProvider(nil, &p, p.Target, maxSt == set)
		} else {
			d.errorf(a["provider"].Expr.Range(), "Missing provider block",
				"Pool %q has provider = %q and needs %s block.", p.Name, p.Provider, withArticle(p.Provider))
		}
	}
	return p, a
}

// decodeProvider decodes provider block b into target. b is nil for a sim
// pool without a sim block. maxOK says whether p.Max is valid, for the sim
// checks.
func (d *decoder) decodeProvider(b *hcl.Block, p *fleet.Pool, target map[string]string, maxOK bool) {
	kind := fleet.ProviderSim
	a := hcl.Attributes{}
	if b != nil {
		kind = b.Type
		a = d.content(b.Body, providerSchemas[kind]).Attributes
	}
	strs := func(names ...string) {
		for _, n := range names {
			var s string
			if d.nonEmpty(a, n, &s) == set {
				target[n] = s
			}
		}
	}
	switch kind {
	case fleet.ProviderAWS:
		strs("asg", "asg_tag", "launch_template", "launch_template_version", "subnet_id", "capacity_reservation_id", "endpoint")
		var chosen []string
		for _, n := range []string{"asg", "asg_tag", "launch_template"} {
			if a[n] != nil {
				chosen = append(chosen, n)
			}
		}
		switch {
		case len(chosen) == 0:
			d.errorf(b.DefRange, "Missing ASG or launch template", "An aws block needs asg (the Auto Scaling group's name), asg_tag (a KEY=VALUE tag that finds it) "+
				"or launch_template (to run instances directly, e.g. in a capacity reservation).")
		case len(chosen) > 1:
			d.invalid(a, chosen[1], "Set only one of asg, asg_tag and launch_template.")
		}
		if t := target["asg_tag"]; t != "" {
			if k, _, ok := strings.Cut(t, "="); !ok || k == "" {
				d.invalid(a, "asg_tag", "asg_tag must be KEY=VALUE, e.g. \"fleetcast/pool=train-burst\", got %q.", t)
			}
		}
		for _, n := range []string{"launch_template_version", "subnet_id", "capacity_reservation_id"} {
			if a[n] != nil && a["launch_template"] == nil {
				d.invalid(a, n, "%s applies only with launch_template (an Auto Scaling group takes it from its own launch template).", n)
			}
		}
		if cr := target["capacity_reservation_id"]; cr != "" && !strings.HasPrefix(cr, "cr-") {
			d.invalid(a, "capacity_reservation_id", "capacity_reservation_id must be a capacity reservation ID such as \"cr-0123456789abcdef0\", got %q.", cr)
		}
		var block bool
		if d.boolean(a, "capacity_block", &block) == set && block {
			if a["capacity_reservation_id"] == nil {
				d.invalid(a, "capacity_block", "capacity_block needs capacity_reservation_id, the block's reservation.")
			}
			target["capacity_block"] = "true"
		}
		var lookup bool
		if d.boolean(a, "spot_price_lookup", &lookup) == set && lookup {
			if p.Capacity != fleet.Spot {
				d.invalid(a, "spot_price_lookup", "spot_price_lookup applies only to a pool with capacity = \"spot\".")
			}
			target["spot_price_lookup"] = "true"
		}
	case fleet.ProviderGCP:
		strs("project", "zone", "mig", "endpoint")
	case fleet.ProviderPlugin:
		strs("command")
		var args []string
		if d.strList(a, "args", &args) == set {
			target["args"] = strings.Join(args, ArgsSeparator)
		}
		var m map[string]string
		if d.strMap(a, "target", &m) == set {
			for k, v := range m {
				target[PluginTargetPrefix+k] = v
			}
		}
	case fleet.ProviderSim:
		capacity, initial, rate := p.Max, p.Min, 0.0
		// capacity may be below min or initial: that simulates a stockout.
		d.atLeast(a, "capacity", 0, &capacity)
		if d.atLeast(a, "initial", 0, &initial) == set && maxOK && initial > p.Max {
			d.invalid(a, "initial", "initial (%d) is greater than the pool's max (%d).", initial, p.Max)
		}
		if d.number(a, "capacity_error_rate", &rate) == set && (rate < 0 || rate > 1) {
			d.invalid(a, "capacity_error_rate", "capacity_error_rate must be between 0 and 1, got %g.", rate)
		}
		target["capacity"] = strconv.Itoa(capacity)
		target["initial"] = strconv.Itoa(initial)
		target["capacity_error_rate"] = strconv.FormatFloat(rate, 'g', -1, 64)
	}
}

func (d *decoder) decodeForecast(body hcl.Body, f *fleet.ForecastSettings) hcl.Attributes {
	a := d.content(body, forecastSchema).Attributes
	stepSt := d.duration(a, "step", &f.Step)
	horizonSt := d.duration(a, "horizon", &f.Horizon)
	historySt := d.duration(a, "history", &f.History)
	d.duration(a, "hysteresis", &f.Hysteresis)
	if d.number(a, "quantile", &f.Quantile) == set && !(f.Quantile > 0 && f.Quantile < 1) {
		d.invalid(a, "quantile", "quantile must be between 0 and 1 (exclusive), got %g.", f.Quantile)
	}
	if stepSt != bad && horizonSt != bad && f.Horizon < f.Step {
		name := "horizon"
		if horizonSt == unset {
			name = "step"
		}
		horizonSt = d.invalid(a, name, "horizon (%s) must not be shorter than step (%s).", f.Horizon, f.Step)
	}
	if horizonSt != bad && historySt != bad && f.History < f.Horizon {
		name := "history"
		if historySt == unset {
			name = "horizon"
		}
		d.invalid(a, name, "history (%s) must not be shorter than horizon (%s).", f.History, f.Horizon)
	}
	return a
}

func (d *decoder) decodeDrain(body hcl.Body, dr *fleet.DrainSettings) hcl.Attributes {
	a := d.content(body, drainSchema).Attributes
	d.duration(a, "checkpoint_max_age", &dr.CheckpointMaxAge)
	d.duration(a, "timeout", &dr.Timeout)
	d.duration(a, "long_running_after", &dr.LongRunningAfter)
	if d.str(a, "signal", &dr.Signal) == set && !slices.Contains(drainSignals, dr.Signal) {
		d.invalid(a, "signal", "Unknown signal %q; signal must be one of %s.", dr.Signal, strings.Join(drainSignals, ", "))
	}
	return a
}

func (d *decoder) decodeLimits(body hcl.Body, l *fleet.Limits) hcl.Attributes {
	a := d.content(body, limitsSchema).Attributes
	d.atLeast(a, "max_gpus", 0, &l.MaxGPUs)
	if d.number(a, "max_spend_per_hour", &l.MaxSpendPerHour) == set && l.MaxSpendPerHour < 0 {
		d.invalid(a, "max_spend_per_hour", "max_spend_per_hour must not be negative, got %g.", l.MaxSpendPerHour)
	}
	d.atLeast(a, "max_scale_in_per_cycle", 1, &l.MaxScaleInPerCycle)
	if d.number(a, "scale_in_share", &l.ScaleInShare) == set && !(l.ScaleInShare > 0 && l.ScaleInShare <= 1) {
		d.invalid(a, "scale_in_share", "scale_in_share must be more than 0 and at most 1, got %g.", l.ScaleInShare)
	}
	d.duration(a, "scale_in_window", &l.ScaleInWindow)
	if d.number(a, "silent_share_halt", &l.SilentShareHalt) == set && !(l.SilentShareHalt > 0 && l.SilentShareHalt <= 1) {
		d.invalid(a, "silent_share_halt", "silent_share_halt must be more than 0 and at most 1, got %g.", l.SilentShareHalt)
	}
	return a
}

func (d *decoder) decodeController(body hcl.Body, c *Controller) hcl.Attributes {
	a := d.content(body, controllerSchema).Attributes
	d.duration(a, "interval", &c.Interval)
	d.duration(a, "agent_timeout", &c.AgentTimeout)
	listen := d.str(a, "listen", &c.Listen)
	if listen == set {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			listen = d.invalid(a, "listen", "listen must be an address such as \"127.0.0.1:8790\" or \":8790\": %v.", err)
		}
	}
	d.nonEmpty(a, "state_dir", &c.StateDir)
	if d.str(a, "fleet", &c.Fleet) == set && !fleetName.MatchString(c.Fleet) {
		d.invalid(a, "fleet", "fleet must be 1-63 lowercase letters, digits and dashes, starting and ending with a letter or digit (it is a tag value), got %q.", c.Fleet)
	}
	cert, key := d.nonEmpty(a, "tls_cert_file", &c.TLSCertFile), d.nonEmpty(a, "tls_key_file", &c.TLSKeyFile)
	switch {
	case cert == set && a["tls_key_file"] == nil:
		d.invalid(a, "tls_cert_file", "tls_cert_file needs tls_key_file, the certificate's private key.")
	case key == set && a["tls_cert_file"] == nil:
		d.invalid(a, "tls_key_file", "tls_key_file needs tls_cert_file, the certificate it is the key of.")
	}
	d.boolean(a, "insecure", &c.Insecure)
	d.nonEmpty(a, "bootstrap_token_file", &c.BootstrapTokenFile)
	d.nonEmpty(a, "aws_identity_certificates", &c.AWSIdentityCertificates)
	if listen == set && cert != set && key != set {
		if err := c.CheckListen(c.Listen); err != nil {
			d.invalid(a, "listen", "%s.", err)
		}
	}
	return a
}

// fleetName is what controller.fleet may be.
var fleetName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (d *decoder) decodeDemand(body hcl.Body, dm *Demand) hcl.Attributes {
	a := d.content(body, demandSchema).Attributes
	url := d.str(a, "prometheus_url", &dm.PrometheusURL)
	if url == set {
		if u, err := neturl.Parse(dm.PrometheusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.invalid(a, "prometheus_url", "prometheus_url must be an http or https URL such as \"http://prometheus:9090\", got %q.", dm.PrometheusURL)
		}
	}
	query := d.str(a, "prometheus_query", &dm.PrometheusQuery)
	if query == set && strings.TrimSpace(dm.PrometheusQuery) == "" {
		d.invalid(a, "prometheus_query", "prometheus_query must not be empty.")
	}
	switch {
	case url == set && a["prometheus_query"] == nil:
		d.invalid(a, "prometheus_url", "prometheus_url needs prometheus_query: the PromQL expression for the GPUs in use, e.g. \"count(DCGM_FI_DEV_GPU_UTIL > 0)\".")
	case query == set && a["prometheus_url"] == nil:
		d.invalid(a, "prometheus_query", "prometheus_query needs prometheus_url, the Prometheus server to ask.")
	}
	d.duration(a, "prometheus_timeout", &dm.PrometheusTimeout)
	return a
}

func (d *decoder) decodeSimulate(body hcl.Body, s *Simulate) hcl.Attributes {
	a := d.content(body, simulateSchema).Attributes
	d.duration(a, "checkpoint_interval", &s.CheckpointInterval)
	d.duration(a, "spot_notice", &s.SpotNotice)
	if d.number(a, "spot_interruptions_per_hour", &s.SpotInterruptionsPerHour) == set && s.SpotInterruptionsPerHour < 0 {
		d.invalid(a, "spot_interruptions_per_hour", "spot_interruptions_per_hour must not be negative, got %g.", s.SpotInterruptionsPerHour)
	}
	if d.durationAtLeast0(a, "checkpoint_duration", &s.CheckpointDuration) == set && s.CheckpointDuration > maxCheckpointDuration {
		d.invalid(a, "checkpoint_duration", "checkpoint_duration must be at most %s (a checkpoint that takes longer is a stuck job), got %s.",
			fleet.FormatDuration(maxCheckpointDuration), fleet.FormatDuration(s.CheckpointDuration))
	}
	if d.number(a, "unresponsive_jobs", &s.UnresponsiveJobs) == set && !(s.UnresponsiveJobs >= 0 && s.UnresponsiveJobs <= 1) {
		d.invalid(a, "unresponsive_jobs", "unresponsive_jobs must be a share of jobs from 0 to 1, got %g.", s.UnresponsiveJobs)
	}
	if d.str(a, "reservations", &s.Reservations) == set && !slices.Contains(ReservationModes, s.Reservations) {
		d.invalid(a, "reservations", "reservations must be %q (every policy holds the configured reservations) or %q (the predictive policy follows the baseline advice), got %q.",
			ReservationsConfigured, ReservationsAdvised, s.Reservations)
	}
	d.duration(a, "advice_after", &s.AdviceAfter)
	d.atLeast(a, "headroom_gpus", 0, &s.HeadroomGPUs)
	if d.str(a, "headroom_placeholders", &s.HeadroomPlaceholders) == set && !slices.Contains(PlaceholderSizes, s.HeadroomPlaceholders) {
		d.invalid(a, "headroom_placeholders", "headroom_placeholders must be %q (each as wide as a node: the buffer is whole empty nodes) or %q (one GPU each: the buffer also fills busy nodes' fragments), got %q.",
			PlaceholdersNode, PlaceholdersGPU, s.HeadroomPlaceholders)
	}
	return a
}

// maxCheckpointDuration bounds simulate.checkpoint_duration.
const maxCheckpointDuration = 24 * time.Hour

func (d *decoder) decodeSynthetic(body hcl.Body, s *Synthetic) hcl.Attributes {
	a := d.content(body, syntheticSchema).Attributes
	seed := int(s.Seed)
	if d.integer(a, "seed", &seed) == set {
		s.Seed = int64(seed)
	}
	baseSt := d.atLeast(a, "base_gpus", 0, &s.BaseGPUs)
	peakSt := d.atLeast(a, "peak_gpus", 0, &s.PeakGPUs)
	if baseSt == set && peakSt == set && s.PeakGPUs < s.BaseGPUs {
		d.invalid(a, "peak_gpus", "peak_gpus (%d) must not be less than base_gpus (%d).", s.PeakGPUs, s.BaseGPUs)
	}
	if d.integer(a, "peak_hour", &s.PeakHour) == set && (s.PeakHour < 0 || s.PeakHour > 23) {
		d.invalid(a, "peak_hour", "peak_hour must be an hour of the day from 0 to 23, got %d.", s.PeakHour)
	}
	if d.number(a, "noise", &s.Noise) == set && s.Noise < 0 {
		d.invalid(a, "noise", "noise must not be negative, got %g.", s.Noise)
	}
	return a
}
