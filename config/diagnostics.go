package config

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// maxSnippet bounds the source line shown under a diagnostic, in
// characters: a longer line is cut to a window around the subject.
const maxSnippet = 120

// NewDiagnosticWriter returns an hcl.DiagnosticWriter that writes each
// diagnostic as FormatDiagnostic does, on one line, then, when its
// subject is in one of files (each file's text by its name), the
// subject's first line of source with its number, and a line of carets
// under the subject, as a compiler does:
//
//	fleet.hcl:6:20: error: Invalid duration: lead_time must be ...
//	  6 |   lead_time      = "soon"
//	    |                    ^^^^^^
//
// (hcl.NewDiagnosticTextWriter marks the subject only with a terminal's
// underline, and puts the position on a line of its own.) A line longer
// than 120 characters is cut to a window around the subject, marked
// with "..."; a line that is not UTF-8 text is not shown.
func NewDiagnosticWriter(w io.Writer, files map[string][]byte) hcl.DiagnosticWriter {
	return &diagnosticWriter{w: w, files: files}
}

type diagnosticWriter struct {
	w     io.Writer
	files map[string][]byte
}

// WriteDiagnostic writes one diagnostic, with its source line where
// there is one.
func (dw *diagnosticWriter) WriteDiagnostic(diag *hcl.Diagnostic) error {
	out := FormatDiagnostic(diag) + "\n"
	if diag.Subject != nil {
		if src, ok := dw.files[diag.Subject.Filename]; ok {
			out += snippet(src, *diag.Subject)
		}
	}
	_, err := io.WriteString(dw.w, out)
	return err
}

// WriteDiagnostics writes each of diags with WriteDiagnostic.
func (dw *diagnosticWriter) WriteDiagnostics(diags hcl.Diagnostics) error {
	for _, diag := range diags {
		if err := dw.WriteDiagnostic(diag); err != nil {
			return err
		}
	}
	return nil
}

// snippet is the line of src where subject starts, with its number, and
// carets under the subject (to the line's end when the subject goes on);
// "" when src has no such line or it is not text.
func snippet(src []byte, subject hcl.Range) string {
	sc := hcl.NewRangeScanner(src, subject.Filename, bufio.ScanLines)
	var line hcl.Range
	found := false
	for sc.Scan() {
		if r := sc.Range(); r.Start.Line == subject.Start.Line {
			line, found = r, true
			break
		}
	}
	if !found || !utf8.Valid(line.SliceBytes(src)) || subject.Start.Byte < line.Start.Byte {
		return ""
	}
	// The subject's characters on the line: at least one, as
	// hcl.NewDiagnosticTextWriter shows an empty range (or one past the
	// line's end, a missing item).
	at := func(b int) int { return min(max(b, line.Start.Byte), line.End.Byte) }
	text := []rune(string(line.SliceBytes(src)))
	from := utf8.RuneCount(src[line.Start.Byte:at(subject.Start.Byte)])
	n := max(1, utf8.RuneCount(src[at(subject.Start.Byte):at(subject.End.Byte)]))
	// A long line is cut to a window: its start, or, for a subject
	// further on, one that starts a little before the subject.
	prefix, suffix := "", ""
	if len(text) > maxSnippet {
		start := 0
		if from >= maxSnippet*3/4 {
			start = min(from-maxSnippet/4, len(text)-maxSnippet)
		}
		end := start + maxSnippet
		if start > 0 {
			prefix = "..."
		}
		if end < len(text) {
			suffix = "..."
		}
		text, from = text[start:end], from-start
		n = max(1, min(n, len(text)-from))
	}
	pad := []rune(strings.Repeat(" ", len(prefix)))
	for i, r := range text {
		if unicode.IsControl(r) && r != '\t' {
			text[i] = '?' // shown, not sent to the terminal
		}
		if i < from {
			if r != '\t' {
				r = ' '
			}
			pad = append(pad, r) // the carets line up under tabs too
		}
	}
	num := strconv.Itoa(line.Start.Line)
	return fmt.Sprintf("  %s | %s%s%s\n  %s | %s%s\n", num, prefix, string(text), suffix,
		strings.Repeat(" ", len(num)), string(pad), strings.Repeat("^", n))
}
