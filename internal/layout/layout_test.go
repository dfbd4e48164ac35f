package layout

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxLines is the most lines a non-test, non-generated Go file may have:
// past it, a file holds more than one job.
const maxLines = 700

// generated matches the line Go's convention puts in generated files.
var generated = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// TestFilesHaveOneJob: no non-test, non-generated Go file of the module is
// over maxLines lines.
func TestFilesHaveOneJob(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two levels up: %v", err)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines, gen := 0, false
		sc := bufio.NewScanner(bytes.NewReader(src))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines++
			gen = gen || generated.MatchString(sc.Text())
		}
		if !gen && lines > maxLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: %d lines, over %d: split it by what each part does", rel, lines, maxLines)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
