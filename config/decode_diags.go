package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

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
