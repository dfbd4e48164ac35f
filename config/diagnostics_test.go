package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// TestDiagnosticWriter: each diagnostic's line, then its source line and
// carets under its subject: lined up under tabs and wide characters, one
// caret for an empty range or one past the line's end, to the line's end
// for a subject that goes on, a window of a long line, no source line
// for one that is not text or a file not given, and control characters
// shown as "?".
func TestDiagnosticWriter(t *testing.T) {
	at := func(src string, line, col, endLine, endCol int) *hcl.Range {
		pos := func(l, c int) hcl.Pos {
			lines := strings.SplitAfter(src, "\n")
			b := 0
			for _, s := range lines[:l-1] {
				b += len(s)
			}
			b += len(string([]rune(lines[l-1])[:c-1]))
			return hcl.Pos{Line: l, Column: c, Byte: b}
		}
		return &hcl.Range{Filename: "f.hcl", Start: pos(line, col), End: pos(endLine, endCol)}
	}
	long := "x = [" + strings.Repeat("1, ", 60) + "\"bad\", " + strings.Repeat("2, ", 60) + "]"
	badAt := strings.Index(long, `"bad"`) + 1
	for _, tt := range []struct {
		name, src string
		subject   func(src string) *hcl.Range
		want      string // after the diagnostic's own line
	}{
		{"one value", "a = 1\nmax = \"x\"\n", func(s string) *hcl.Range { return at(s, 2, 7, 2, 10) },
			"  2 | max = \"x\"\n    |       ^^^\n"},
		{"tabs", "\tmax\t= \"x\"\n", func(s string) *hcl.Range { return at(s, 1, 8, 1, 11) },
			"  1 | \tmax\t= \"x\"\n    | \t   \t  ^^^\n"},
		{"wide characters", "name = \"é日\" x\n", func(s string) *hcl.Range { return at(s, 1, 12, 1, 13) },
			"  1 | name = \"é日\" x\n    |            ^\n"},
		{"empty range", "pool \"a\" {\n}\n", func(s string) *hcl.Range { return at(s, 2, 1, 2, 1) },
			"  2 | }\n    | ^\n"},
		{"past the line's end", "a = [\n", func(s string) *hcl.Range { return at(s, 1, 6, 2, 1) },
			"  1 | a = [\n    |      ^\n"},
		{"goes on", "a = [\n  1,\n]\n", func(s string) *hcl.Range { return at(s, 1, 5, 3, 2) },
			"  1 | a = [\n    |     ^\n"},
		{"long line", long + "\n", func(s string) *hcl.Range { return at(s, 1, badAt, 1, badAt+5) },
			"  1 | ..." + string([]rune(long)[badAt-1-30:badAt-1-30+120]) + "...\n    |    " + strings.Repeat(" ", 30) + "^^^^^\n"},
		{"long line, near its start", long + "\n", func(s string) *hcl.Range { return at(s, 1, 1, 1, 2) },
			"  1 | " + string([]rune(long)[:120]) + "...\n    | ^\n"},
		{"control characters", "a = \"\x1b[31m\"\n", func(s string) *hcl.Range { return at(s, 1, 5, 1, 12) },
			"  1 | a = \"?[31m\"\n    |     ^^^^^^^\n"},
		{"not text", "a = \"\xff\"\n", func(s string) *hcl.Range { return at(s, 1, 5, 1, 6) }, ""},
		{"another file", "a = 1\n", func(s string) *hcl.Range { r := at(s, 1, 5, 1, 6); r.Filename = "g.hcl"; return r }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			diag := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Bad", Detail: "Why.", Subject: tt.subject(tt.src)}
			var buf bytes.Buffer
			if err := config.NewDiagnosticWriter(&buf, map[string][]byte{"f.hcl": []byte(tt.src)}).WriteDiagnostic(diag); err != nil {
				t.Fatal(err)
			}
			want := config.FormatDiagnostic(diag) + "\n" + tt.want
			if buf.String() != want {
				t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
			}
		})
	}
}

// TestSuggestions: a provider, capacity or plugin name a few letters from
// a known one is an error that suggests it; one near none suggests
// nothing.
func TestSuggestions(t *testing.T) {
	plugin := "plugin \"racks\" {\n  path = \"/bin/racks\"\n  sha256 = \"" + strings.Repeat("0", 64) + "\"\n}\n"
	for _, tt := range []struct {
		name, src, want string
	}{
		{"provider", "pool \"a\" {\n  provider = \"aws2\"\n  instance_type = \"p5\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n}\n",
			`Unknown provider "aws2"; the known providers are aws, gcp, plugin, sim. Did you mean "aws"?`},
		{"provider's case", "pool \"a\" {\n  provider = \"GCP\"\n  instance_type = \"p5\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n}\n",
			`Did you mean "gcp"?`},
		{"provider near none", "pool \"a\" {\n  provider = \"azure\"\n  instance_type = \"p5\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n}\n",
			`Unknown provider "azure"; the known providers are aws, gcp, plugin, sim.`},
		{"capacity", simPool("a", "  capacity = \"on-demand\"\n"), `Unknown capacity "on-demand"; capacity must be "reserved", "on_demand" or "spot". Did you mean "on_demand"?`},
		{"plugin", "pool \"a\" {\n  provider = \"plugin\"\n  plugin = \"rack\"\n  instance_type = \"p5\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n}\n" + plugin,
			`Pool "a" names plugin "rack", which the config has no plugin "rack" block for. Did you mean "racks"?`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := config.Parse("x.hcl", []byte(tt.src), registry.Blocks())
			if len(diags) != 1 || !strings.HasSuffix(diags[0].Detail, tt.want) || strings.Count(diags[0].Detail, "Did you mean") != strings.Count(tt.want, "Did you mean") {
				t.Errorf("got\n%s\nwant one error ending %q", formatAll(diags), tt.want)
			}
		})
	}
}

// TestOrigin: a parsed config knows where each block and attribute is,
// nested blocks and names with dots included, and its file's text.
func TestOrigin(t *testing.T) {
	src := simPool("a.b", "  sim {\n    initial = 1\n  }\n") + "controller {\n  fleet = \"x\"\n}\n"
	cfg, diags := config.Parse("o.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	for _, tt := range []struct {
		path      []string
		line, col int // 0: not set
	}{
		{[]string{"pool", "a.b"}, 1, 1},
		{[]string{"pool", "a.b", "sim", "initial"}, strings.Count(src[:strings.Index(src, "initial")], "\n") + 1, 15},
		{[]string{"controller", "fleet"}, strings.Count(src[:strings.Index(src, "fleet")], "\n") + 1, 11},
		{[]string{"controller", "listen"}, 0, 0},
		{[]string{"pool", "a", "b.sim"}, 0, 0},
	} {
		r := cfg.Origin.Where(tt.path...)
		if r.Start.Line != tt.line || r.Start.Column != tt.col || (tt.line > 0) != (r.Filename == "o.hcl") {
			t.Errorf("Where(%q) = %s, want line %d column %d", tt.path, r, tt.line, tt.col)
		}
	}
	if string(cfg.Origin.Files()["o.hcl"]) != src {
		t.Error("Files does not hold the file's text")
	}
	var none *config.Origin
	if none.Where("pool") != (hcl.Range{}) || none.Files() != nil {
		t.Error("a nil Origin knows a place")
	}
}
