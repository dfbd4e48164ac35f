package state_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// owned names the record a write method changes and the one package (its
// path from the module root) that may call it.
type owned struct{ record, owner string }

// writeOwners maps every method that writes a record the controller keeps to
// that record and its one writer. TestWritersTableComplete keeps it in step
// with the methods *Store (and *Memory) have.
var writeOwners = map[string]owned{
	"AppendDemand":      {"demand history", "loop"},
	"PruneDemand":       {"demand history", "loop"},
	"FillDemand":        {"demand history", "loop"},
	"PutDrain":          {"drains", "loop"},
	"DeleteDrain":       {"drains", "loop"},
	"PruneDrainLog":     {"drains", "loop"},
	"PutBackoff":        {"back-offs", "loop"},
	"DeleteBackoff":     {"back-offs", "loop"},
	"PutHalted":         {"scale-in halt", "loop"},
	"PutIntent":         {"intents", "actuator"},
	"DoneIntent":        {"intents", "actuator"},
	"SettleLaunch":      {"launches", "actuator"},
	"PutLaunches":       {"launches", "actuator"},
	"DeleteLaunches":    {"launches", "actuator"},
	"PutSeen":           {"first seen", "actuator"},
	"DeleteSeen":        {"first seen", "actuator"},
	"PutReady":          {"ready", "controller"},
	"DeleteReady":       {"ready", "controller"},
	"PutCancelled":      {"cancelled", "controller"},
	"DeleteCancelled":   {"cancelled", "controller"},
	"PutPools":          {"pools", "controller"},
	"ClaimFleet":        {"fleet name", "controller"},
	"PutCredential":     {"credentials", "nodeauth"},
	"DeleteCredentials": {"credentials", "nodeauth"},
	"PutAPIToken":       {"API tokens", "apiauth"},
	"PutUsage":          {"usage", "controller"},
	"PruneUsage":        {"usage", "controller"},
	"DeleteAPIToken":    {"API tokens", "apiauth"},
	"PutViews":          {"views", "controller"},
	// A restore writes every record, into a state that holds none, with
	// no controller running: `autoscaler state import`.
	"LoadExport": {"every record (a restore)", "cmd/autoscaler"},
}

// reads are the exported methods of the record types that change nothing:
// every other exported method is a write, and must be in the table, so a
// write of any name (Set, Record, Forget, ...) cannot pass unowned.
var reads = []string{"Path", "Close", "Export", "Views", "Demand", "LatestDemand", "DemandSeries", "Backoffs", "Drains", "DrainLog", "Halted",
	"Intents", "Launches", "SeenNodes", "ReadyNodes", "CancelledDrains", "Pools", "Credentials", "APITokens", "UsageHours", "UsageJobs"}

// recordTypes are the receiver types whose write methods the table must cover.
var recordTypes = []string{"Store", "Memory"}

// write is one use of a write method outside package state.
type write struct{ record, pkg, pos string }

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			break
		}
		dir = filepath.Dir(dir)
	}
	t.Fatalf("no go.mod above %s (%v)", dir, err)
	return ""
}

// writeMethods parses the non-test files of the package in dir and returns
// the exported write methods declared on the record types, with where each is.
func writeMethods(fsys fs.FS, dir string) (map[string]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	fset, found := token.NewFileSet(), map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parseFile(fsys, fset, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || slices.Contains(reads, fn.Name.Name) {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && slices.Contains(recordTypes, id.Name) {
				found[fn.Name.Name] = fset.Position(fn.Pos()).String()
			}
		}
	}
	return found, nil
}

// parseFile parses one file of fsys, without resolving objects (only syntax is needed).
func parseFile(fsys fs.FS, fset *token.FileSet, name string) (*ast.File, error) {
	src, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	return parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
}

// findWrites walks the module in fsys (its root at "."), skipping testdata,
// vendor, hidden and _ directories, test files and the package skip, and
// returns every selector naming a method in table: calls and method values
// alike. It parses only: a name is a write whatever type it is called on.
func findWrites(fsys fs.FS, skip string, table map[string]owned) ([]write, error) {
	var writes []write
	fset := token.NewFileSet()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != "." && (name == "testdata" || name == "vendor" || name[0] == '.' || name[0] == '_' || p == skip) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parseFile(fsys, fset, p)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if o, ok := table[sel.Sel.Name]; ok {
					pos := fset.Position(sel.Sel.Pos())
					writes = append(writes, write{o.record, path.Dir(p), fmt.Sprintf("%s:%d", pos.Filename, pos.Line)})
				}
			}
			return true
		})
		return nil
	})
	return writes, err
}

// problems returns, per record, one line for a record written by more than
// one package or by a package other than its owner in table.
func problems(writes []write, table map[string]owned) []string {
	owner := map[string]string{}
	for _, o := range table {
		owner[o.record] = o.owner
	}
	byRecord := map[string]map[string][]string{} // record -> package -> positions
	for _, w := range writes {
		if byRecord[w.record] == nil {
			byRecord[w.record] = map[string][]string{}
		}
		byRecord[w.record][w.pkg] = append(byRecord[w.record][w.pkg], w.pos)
	}
	var out []string
	for record, pkgs := range byRecord {
		if _, ok := pkgs[owner[record]]; ok && len(pkgs) == 1 {
			continue
		}
		var parts []string
		for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
			parts = append(parts, fmt.Sprintf("%s (%s)", pkg, strings.Join(pkgs[pkg], ", ")))
		}
		who := parts[len(parts)-1]
		if len(parts) > 1 {
			who = strings.Join(parts[:len(parts)-1], ", ") + " and " + who
		}
		out = append(out, fmt.Sprintf("%s: written by %s; one owner: %s", record, who, owner[record]))
	}
	slices.Sort(out)
	return out
}

// sourceFS is the module's source as the build sees it: the files on
// disk, each replaced by its stand-in where GOFLAGS gives go an -overlay
// (the mutation runner makes its mutants that way, so a mutant of a
// file this scan reads is scanned as built).
func sourceFS(t *testing.T) fs.FS {
	t.Helper()
	root := moduleRoot(t)
	o := overlaid{FS: os.DirFS(root), root: root}
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		path, ok := strings.CutPrefix("-"+strings.TrimLeft(f, "-"), "-overlay=")
		if !ok {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("GOFLAGS -overlay: %v", err)
		}
		if err := json.Unmarshal(b, &o.overlay); err != nil {
			t.Fatalf("GOFLAGS -overlay %s: %v", path, err)
		}
	}
	return o
}

// overlaid is a directory's files with go's -overlay applied to their
// contents (Replace maps a file's absolute path to its stand-in's).
type overlaid struct {
	fs.FS
	root    string
	overlay struct{ Replace map[string]string }
}

// Open opens name's stand-in if the overlay replaces it.
func (o overlaid) Open(name string) (fs.File, error) {
	if alt, ok := o.overlay.Replace[filepath.Join(o.root, filepath.FromSlash(name))]; ok {
		if alt == "" { // deleted
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return os.Open(alt)
	}
	return o.FS.Open(name)
}

// TestWritersTableComplete fails on a write method of *Store or *Memory the
// table does not list, and on a table entry neither type has any more.
func TestWritersTableComplete(t *testing.T) {
	have, err := writeMethods(sourceFS(t), "state")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range slices.Sorted(maps.Keys(have)) {
		if _, ok := writeOwners[m]; !ok {
			t.Errorf("%s (%s) writes a record writeOwners does not list: add it with its record and owner", m, have[m])
		}
	}
	for m := range writeOwners {
		if _, ok := have[m]; !ok {
			t.Errorf("writeOwners lists %s, which no record type in state declares any more", m)
		}
	}
}

// TestWritersOneOwner fails for each record written outside its owner package.
func TestWritersOneOwner(t *testing.T) {
	writes, err := findWrites(sourceFS(t), "state", writeOwners)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems(writes, writeOwners) {
		t.Error(p)
	}
}

// TestWritersChecker shows the checker on small fake trees: it catches a
// second writer, a method value and a stranger, and ignores test files,
// testdata, hidden directories and package state itself.
func TestWritersChecker(t *testing.T) {
	file := func(body string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("package p\n\nfunc f() {\n\t" + body + "\n}\n")}
	}
	owner := file("b.PutDrain(d)")
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  []string
	}{
		{"owner only", fstest.MapFS{"loop/l.go": owner}, nil},
		{"second writer", fstest.MapFS{"loop/l.go": owner, "controller/gone.go": file("_ = s.x.DeleteDrain(n)")},
			[]string{"drains: written by controller (controller/gone.go:4) and loop (loop/l.go:4); one owner: loop"}},
		{"method value", fstest.MapFS{"loop/l.go": owner, "controller/gone.go": file("m.del = c.store.PruneDrainLog")},
			[]string{"drains: written by controller (controller/gone.go:4) and loop (loop/l.go:4); one owner: loop"}},
		{"not the owner", fstest.MapFS{"apiauth/a.go": file("g(s.PutPools)")},
			[]string{"pools: written by apiauth (apiauth/a.go:4); one owner: controller"}},
		{"ignored", fstest.MapFS{
			"loop/l.go":                owner,
			"controller/c_test.go":     file("s.PutDrain(d)"),
			"controller/testdata/x.go": file("s.PutDrain(d)"),
			".ci/x.go":                 file("s.PutDrain(d)"),
			"state/store.go":           file("s.PutDrain(d)"),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes, err := findWrites(tc.files, "state", writeOwners)
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(writes, writeOwners); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}
