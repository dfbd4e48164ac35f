package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// readConfig reads and parses the config at path with this build's
// providers, printing nothing: the config (nil when there is an error),
// the file's text by its name (for the diagnostics' source lines; nil
// when it could not be read) and the diagnostics.
func readConfig(path string) (*config.Config, map[string][]byte, hcl.Diagnostics) {
	src, diags := config.ReadFile(path)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	cfg, diags := config.Parse(path, src, registry.Blocks())
	return cfg, map[string][]byte{path: src}, diags
}

// writeDiagnostics writes diags to w, each with its source line and a
// caret under what it refuses (config.NewDiagnosticWriter), from files.
func writeDiagnostics(w io.Writer, files map[string][]byte, diags hcl.Diagnostics) {
	_ = config.NewDiagnosticWriter(w, files).WriteDiagnostics(diags)
}

// diagnosticsOf splits err into the diagnostics it holds (those of each
// *registry.DiagnosticsError in it, alone or joined with other errors)
// and its other errors.
func diagnosticsOf(err error) (hcl.Diagnostics, []error) {
	if err == nil {
		return nil, nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var diags hcl.Diagnostics
		var rest []error
		for _, e := range j.Unwrap() {
			d, r := diagnosticsOf(e)
			diags, rest = append(diags, d...), append(rest, r...)
		}
		return diags, rest
	}
	if de := (*registry.DiagnosticsError)(nil); errors.As(err, &de) {
		return de.Diags, nil
	}
	return nil, []error{err}
}

// reportError writes a command's error to stderr: the diagnostics it
// holds, each with its source line from origin (see diagnosticsOf), and
// each other error as "NAME: ERROR".
func reportError(e *env, name string, origin *config.Origin, err error) {
	diags, rest := diagnosticsOf(err)
	writeDiagnostics(e.stderr, origin.Files(), diags)
	for _, r := range rest {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, r)
	}
}

// validateJSON is `validate -json`'s output, as `terraform validate
// -json` writes it: whether the config is valid, how many errors and
// warnings it has, and each diagnostic with its place.
type validateJSON struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []diagnosticJSON `json:"diagnostics"`
}

// diagnosticJSON is one diagnostic: "error" or "warning", its summary and
// detail, and the range of the file it is about (none for one about no
// place: a file that cannot be read, the count of those left out).
type diagnosticJSON struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail"`
	Range    *rangeJSON `json:"range,omitempty"`
}

type rangeJSON struct {
	Filename string  `json:"filename"`
	Start    posJSON `json:"start"`
	End      posJSON `json:"end"`
}

// posJSON is a position: line and column from 1 (columns count
// characters), byte from 0.
type posJSON struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// newValidateJSON is diags as validateJSON.
func newValidateJSON(diags hcl.Diagnostics) validateJSON {
	out := validateJSON{FormatVersion: "1.0", ErrorCount: config.ErrorCount(diags), WarningCount: config.WarningCount(diags), Diagnostics: []diagnosticJSON{}}
	out.Valid = out.ErrorCount == 0
	pos := func(p hcl.Pos) posJSON { return posJSON{Line: p.Line, Column: p.Column, Byte: p.Byte} }
	for _, d := range diags {
		j := diagnosticJSON{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			j.Severity = "warning"
		}
		if o, ok := d.Extra.(config.Omitted); ok {
			j.Detail = o.String()
		}
		if r := d.Subject; r != nil {
			j.Range = &rangeJSON{Filename: r.Filename, Start: pos(r.Start), End: pos(r.End)}
		}
		out.Diagnostics = append(out.Diagnostics, j)
	}
	return out
}
