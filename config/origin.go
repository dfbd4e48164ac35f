package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Origin is where a config was read from: its file's text, and where in
// it each block and attribute is, so that what is found wrong after
// parsing (by `validate -files`, a plugin, a cloud, the registry) is
// reported at its place in the file, with its source line.
type Origin struct {
	// Filename and Src are the file's name and text.
	Filename string
	Src      []byte
	// at are the blocks' headers and the attributes' values, by path.
	at map[string]hcl.Range
}

// newOrigin indexes the blocks and attributes of body, parsed from src.
func newOrigin(filename string, src []byte, body hcl.Body) *Origin {
	o := &Origin{Filename: filename, Src: src, at: map[string]hcl.Range{}}
	if sb, ok := body.(*hclsyntax.Body); ok {
		o.index(nil, sb)
	}
	return o
}

// index records the attributes and blocks of body under path.
func (o *Origin) index(path []string, body *hclsyntax.Body) {
	for name, a := range body.Attributes {
		o.at[originKey(append(path, name))] = a.Expr.Range()
	}
	for _, b := range body.Blocks {
		p := append(append(path[:len(path):len(path)], b.Type), b.Labels...)
		k := originKey(p)
		if _, dup := o.at[k]; !dup { // a duplicate block is an error at the second: the first stays
			o.at[k] = b.DefRange()
		}
		o.index(p, b.Body)
	}
}

// originKey joins a path's parts with a byte no name holds (a pool's name
// may hold dots).
func originKey(path []string) string { return strings.Join(path, "\x00") }

// Where is where the file sets what path names, part by part: an
// attribute's value (["controller", "tls_cert_file"], ["pool", NAME,
// "provider"], ["plugin", NAME, "sha256"]) or a block's header (["pool",
// NAME], ["pool", NAME, "aws"]). It is the zero Range (no Filename) where
// the file does not set it, or o is nil.
func (o *Origin) Where(path ...string) hcl.Range {
	if o == nil {
		return hcl.Range{}
	}
	return o.at[originKey(path)]
}

// Files is the file's text by its name, as NewDiagnosticWriter takes it;
// nil when o is nil.
func (o *Origin) Files() map[string][]byte {
	if o == nil {
		return nil
	}
	return map[string][]byte{o.Filename: o.Src}
}
