// Package proctest finds the processes a test left running.
package proctest

import (
	"bytes"
	"os"
	"path/filepath"
)

// Running lists the IDs of the processes running the executable at path
// (Linux: read from /proc; none elsewhere).
func Running(path string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(b, []byte(path+"\x00")) {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}
