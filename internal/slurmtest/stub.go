package slurmtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Script writes an executable shell script of body to dir/name, a
// stand-in for one of Slurm's commands (squeue, sinfo) in tests that need
// no cluster, and returns its path.
func Script(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Capture is the absolute path of a capture of Slurm 22.05's JSON in
// slurm/testdata (squeue-22.05.json, sinfo-22.05.json, and
// squeue-22.05-limits.json, that capture with three reasons edited: see
// slurm.TestDemandLimits), for a stand-in to print.
func Capture(t testing.TB, name string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("slurmtest: no path for this file")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "slurm", "testdata", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}
