package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

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

// Load reads the config file at path with ReadFile and parses it with
// Parse, decoding the pools' provider blocks with providers.
func Load(path string, providers []ProviderBlock) (*Config, hcl.Diagnostics) {
	src, diags := ReadFile(path)
	if diags.HasErrors() {
		return nil, diags
	}
	return Parse(path, src, providers)
}

// ReadFile reads the config file at path. A read error is returned as an
// error diagnostic whose detail names the file; a file larger than
// MaxFileSize is refused without reading it.
func ReadFile(path string) ([]byte, hcl.Diagnostics) {
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
	return src, nil
}

// Parse parses src, a config in native HCL syntax read from filename, and
// validates it. Each pool's provider block is decoded by its provider's
// ProviderBlock, one of providers (providers/registry lists this build's);
// a pool of a provider not among them is an error. It returns the config with every default applied, or nil and
// the diagnostics when there is any error. All errors are collected in one
// pass, sorted by position; each has a Subject pointing at the offending
// value, attribute or block. At most MaxDiagnostics are returned, the
// first in the file, and then one standing for the rest (see Omitted).
// Warnings, if any, are returned with the config, whose Origin keeps src
// and where each block and attribute is, for errors found later. Input larger than
// MaxFileSize, that is not text (a NUL byte, bytes that are not UTF-8),
// or that nests deeper than MaxNesting or has a line of more than
// MaxLineTokens tokens, is refused with one error before HCL parses it.
func Parse(filename string, src []byte, providers []ProviderBlock) (*Config, hcl.Diagnostics) {
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
	d := newDecoder(providers)
	d.add(diags...)
	cfg := d.decodeFile(file.Body)
	diags = capDiagnostics(d.diags)
	if d.errors > 0 {
		return nil, diags
	}
	cfg.Origin = newOrigin(filename, src, file.Body)
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
	SortDiagnostics(diags)
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
	return countOf(diags, hcl.DiagError, func(o Omitted) int { return o.Errors })
}

// WarningCount is the number of warnings diags hold or stand for (see
// Omitted).
func WarningCount(diags hcl.Diagnostics) int {
	return countOf(diags, hcl.DiagWarning, func(o Omitted) int { return o.Warnings })
}

// countOf counts the diagnostics of severity sev, and those an Omitted
// stands for (omitted says how many).
func countOf(diags hcl.Diagnostics, sev hcl.DiagnosticSeverity, omitted func(Omitted) int) int {
	n := 0
	for _, diag := range diags {
		if o, ok := diag.Extra.(Omitted); ok {
			n += omitted(o)
		} else if diag.Severity == sev {
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
// there is none; newlines in the detail become spaces. NewDiagnosticWriter
// adds each one's source line.
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	return NewDiagnosticWriter(w, nil).WriteDiagnostics(diags)
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
// could take hours to convert to a string, or an infinite one (1/0).
func hugeNumber(v cty.Value) bool {
	huge := false
	cty.Walk(v, func(_ cty.Path, v cty.Value) (bool, error) {
		if v.Type() == cty.Number && v.IsKnown() && !v.IsNull() {
			bf := v.AsBigFloat()
			exp := bf.MantExp(nil)
			huge = huge || bf.IsInf() || exp > maxExponent || exp < -maxExponent
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

// SortDiagnostics orders diags by position, those without a subject
// first, keeping the order of those at one place.
func SortDiagnostics(diags hcl.Diagnostics) {
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
