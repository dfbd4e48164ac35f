package config

import (
	"encoding/json"
	"maps"
	"math/big"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

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
